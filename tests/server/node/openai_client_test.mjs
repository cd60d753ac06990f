// Drives a running `vela serve` with the official openai npm client: completions and chat
// completions, whole and streamed. Usage: node openai_client_test.mjs BASE_URL MODEL [API_KEY]
// Exits 0 when every check passes; prints what failed otherwise.
import OpenAI from 'openai';

const [baseURL, model, apiKey = 'unused'] = process.argv.slice(2);
if (!baseURL || !model) {
  console.error('usage: node openai_client_test.mjs BASE_URL MODEL [API_KEY]');
  process.exit(2);
}
const client = new OpenAI({ baseURL, apiKey, timeout: 20000, maxRetries: 0 });

function check(condition, message) {
  if (!condition) throw new Error(message);
}

async function completions() {
  const r = await client.completions.create({
    model, prompt: 'Once upon a time', max_tokens: 8, temperature: 0,
  });
  check(r.object === 'text_completion', `object ${r.object}`);
  check(r.model === model, `model ${r.model}`);
  check(r.choices.length === 1 && typeof r.choices[0].text === 'string', 'one text choice');
  check(['stop', 'length'].includes(r.choices[0].finish_reason), `finish ${r.choices[0].finish_reason}`);
  check(r.usage.completion_tokens > 0 && r.usage.total_tokens ===
        r.usage.prompt_tokens + r.usage.completion_tokens, 'usage adds up');
  return r.choices[0].text;
}

async function streamedCompletions(expected) {
  const stream = await client.completions.create({
    model, prompt: 'Once upon a time', max_tokens: 8, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  });
  let text = '', finish = null, usage = null, chunks = 0;
  for await (const chunk of stream) {
    ++chunks;
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.text;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  check(chunks >= 2, `only ${chunks} chunks`);
  check(text === expected, `streamed text ${JSON.stringify(text)} != ${JSON.stringify(expected)}`);
  check(finish !== null, 'a finish_reason arrived');
  check(usage && usage.completion_tokens > 0, 'usage chunk');
}

async function chat() {
  const r = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: 'Tell me a story' }], max_tokens: 8, temperature: 0,
  });
  check(r.object === 'chat.completion', `object ${r.object}`);
  const m = r.choices[0].message;
  check(m.role === 'assistant' && typeof m.content === 'string', 'assistant message');
  return m.content;
}

async function streamedChat(expected) {
  const stream = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: 'Tell me a story' }], max_tokens: 8, temperature: 0,
    stream: true,
  });
  let text = '', role = null, finish = null;
  for await (const chunk of stream) {
    check(chunk.object === 'chat.completion.chunk', `object ${chunk.object}`);
    for (const c of chunk.choices) {
      if (c.delta.role) role = c.delta.role;
      if (c.delta.content) text += c.delta.content;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  check(role === 'assistant', 'the first delta names the role');
  check(text === expected, `streamed chat ${JSON.stringify(text)} != ${JSON.stringify(expected)}`);
  check(finish !== null, 'a finish_reason arrived');
}

async function errors() {
  try {
    await client.completions.create({ model: 'no-such-model', prompt: 'x', max_tokens: 1 });
    check(false, 'an unknown model should fail');
  } catch (e) {
    check(e instanceof OpenAI.APIError && e.status === 404, `unknown model: ${e}`);
  }
  try {
    await client.completions.create({ model, prompt: 'x', temperature: -1 });
    check(false, 'a negative temperature should fail');
  } catch (e) {
    check(e instanceof OpenAI.BadRequestError, `bad temperature: ${e}`);
  }
}

async function models() {
  const list = await client.models.list();
  const ids = list.data.map((m) => m.id);
  check(ids.includes(model), `models ${ids}`);
}

try {
  await models();
  const text = await completions();
  await streamedCompletions(text);
  const reply = await chat();
  await streamedChat(reply);
  await errors();
  console.log('openai client: all checks passed');
} catch (e) {
  console.error(`openai client: ${e.stack || e}`);
  process.exit(1);
}
