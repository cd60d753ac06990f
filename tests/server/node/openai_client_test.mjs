// Drives a running `vela serve` with the official openai npm client: completions and chat
// completions, whole and streamed; embeddings; echo, logit_bias and best_of; a model by id.
// Usage: node openai_client_test.mjs BASE_URL MODEL [API_KEY]
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

async function modelById() {
  const m = await client.models.retrieve(model);
  check(m.id === model && m.object === 'model', `model ${JSON.stringify(m)}`);
}

// The client asks for base64 by default and decodes it; float is asked for explicitly.
async function embeddings() {
  const texts = ['Once upon a time', 'A big red ball'];
  const r = await client.embeddings.create({ model, input: texts });
  check(r.object === 'list' && r.data.length === 2, `embeddings ${r.data.length}`);
  for (const d of r.data) {
    const norm = Math.sqrt(d.embedding.reduce((s, x) => s + x * x, 0));
    check(Math.abs(norm - 1) < 1e-4, `embedding norm ${norm}`);
  }
  check(r.usage.prompt_tokens > 0, 'embedding usage');
  const one = await client.embeddings.create({ model, input: texts[1], encoding_format: 'float' });
  const diff = Math.max(...one.data[0].embedding.map((x, i) => Math.abs(x - r.data[1].embedding[i])));
  check(diff < 1e-5, `alone vs batched embedding differ by ${diff}`);
}

async function completionOptions(text) {
  const prompt = 'Once upon a time';
  const echoed = await client.completions.create({
    model, prompt, max_tokens: 8, temperature: 0, echo: true,
  });
  check(echoed.choices[0].text === prompt + text, `echo ${JSON.stringify(echoed.choices[0].text)}`);

  // A +100 bias on one token makes greedy decoding pick it every time.
  const biased = await client.completions.create({
    model, prompt, max_tokens: 4, temperature: 0, logprobs: 0, logit_bias: { 70: 100 },
  });
  const tokens = biased.choices[0].logprobs.tokens;
  check(tokens.length === 4 && tokens.every((t) => t === tokens[0]), `biased ${tokens}`);

  // best_of 4, n 2: the two of the four candidates with the highest cumulative logprob (the
  // same four candidates as n 4: the seed of candidate j is seed + j).
  const sum = (c) => c.logprobs.token_logprobs.reduce((s, x) => s + x, 0);
  const all = await client.completions.create({
    model, prompt, max_tokens: 6, temperature: 1, seed: 7, n: 4, logprobs: 0,
  });
  const ranked = all.choices.map((c) => [sum(c), c.text]).sort((a, b) => b[0] - a[0]);
  const best = await client.completions.create({
    model, prompt, max_tokens: 6, temperature: 1, seed: 7, n: 2, best_of: 4, logprobs: 0,
  });
  check(best.choices.length === 2, `best_of choices ${best.choices.length}`);
  check(best.choices[0].text === ranked[0][1] && best.choices[1].text === ranked[1][1],
        `best_of returned ${JSON.stringify(best.choices.map((c) => c.text))}, ` +
        `ranked ${JSON.stringify(ranked)}`);
  check(best.choices.map((c) => c.index).join() === '0,1', 'best_of indices');
}

try {
  await models();
  await modelById();
  await embeddings();
  const text = await completions();
  await streamedCompletions(text);
  await completionOptions(text);
  const reply = await chat();
  await streamedChat(reply);
  await errors();
  console.log('openai client: all checks passed');
} catch (e) {
  console.error(`openai client: ${e.stack || e}`);
  process.exit(1);
}
