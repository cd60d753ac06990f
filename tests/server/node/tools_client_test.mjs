// Structured output and tool calling through the official openai npm client against a running
// `vela serve` (random-weight model, Hermes-style chat template): response_format json_schema
// (with zod's zodResponseFormat and the client's parse helper when zod is installed), tools with
// tool_choice "required" and a named function, and streamed tool calls assembled by the
// client's stream helper, with every token's logprobs. Usage: node tools_client_test.mjs BASE_URL MODEL
import OpenAI from 'openai';

const [baseURL, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: 'unused', timeout: 60000, maxRetries: 0 });

function check(condition, message) {
  if (!condition) throw new Error(message);
}

const weather = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Weather forecast',
    parameters: {
      type: 'object',
      properties: {
        city: { type: 'string', maxLength: 10 },
        days: { type: 'integer', minimum: 1, maximum: 7 },
      },
      required: ['city', 'days'],
      additionalProperties: false,
    },
  },
};
const time = {
  type: 'function',
  function: {
    name: 'get_time',
    parameters: { type: 'object', properties: { zone: { enum: ['UTC', 'CET'] } }, required: ['zone'] },
  },
};
const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];

// JSON Schema's maxLength counts characters (code points); a JS string's length counts UTF-16
// units, so an emoji counts twice there.
const characters = (s) => [...s].length;

function checkCall(call, names) {
  check(typeof call.id === 'string' && call.id.length > 0, 'call id');
  check(call.type === 'function', `type ${call.type}`);
  check(names.includes(call.function.name), `name ${call.function.name}`);
  const args = JSON.parse(call.function.arguments);
  if (call.function.name === 'get_weather') {
    check(typeof args.city === 'string' && characters(args.city) <= 10, `city ${args.city}`);
    check(Number.isInteger(args.days) && args.days >= 1 && args.days <= 7, `days ${args.days}`);
  } else {
    check(['UTC', 'CET'].includes(args.zone), `zone ${args.zone}`);
  }
}

async function required() {
  for (let seed = 0; seed < 5; ++seed) {
    const r = await client.chat.completions.create({
      model, messages, tools: [weather, time], tool_choice: 'required', temperature: 1, seed,
      max_tokens: 300,
    });
    const c = r.choices[0];
    check(c.finish_reason === 'tool_calls', `finish ${c.finish_reason}: ${JSON.stringify(c.message)}`);
    check(c.message.tool_calls.length >= 1, 'at least one call');
    for (const call of c.message.tool_calls) checkCall(call, ['get_weather', 'get_time']);
  }
}

async function named() {
  const r = await client.chat.completions.create({
    model, messages, tools: [weather, time], temperature: 1, max_tokens: 300,
    tool_choice: { type: 'function', function: { name: 'get_time' } }, parallel_tool_calls: false,
  });
  const c = r.choices[0];
  check(c.finish_reason === 'tool_calls', `finish ${c.finish_reason}`);
  check(c.message.tool_calls.length === 1, `${c.message.tool_calls.length} calls`);
  checkCall(c.message.tool_calls[0], ['get_time']);
  // The call and its result go back into the conversation.
  const follow = await client.chat.completions.create({
    model, tools: [weather, time], tool_choice: 'none', max_tokens: 8, temperature: 0,
    messages: [...messages, c.message,
      { role: 'tool', tool_call_id: c.message.tool_calls[0].id, content: '12:00' }],
  });
  check(typeof follow.choices[0].message.content === 'string', 'answer after the tool result');
}

async function streamed() {
  for (let seed = 0; seed < 3; ++seed) {
    const stream = client.beta.chat.completions.stream({
      model, messages, tools: [weather, time], temperature: 1, seed, max_tokens: 300,
      tool_choice: { type: 'function', function: { name: 'get_weather' } }, stream: true,
    });
    let deltas = 0;
    stream.on('chunk', (chunk) => {
      const d = chunk.choices[0]?.delta;
      if (d?.tool_calls) ++deltas;
      check(!d?.content || !d.content.includes('<tool_call>'), `call leaked as content: ${d?.content}`);
    });
    const final = await stream.finalChatCompletion();
    const c = final.choices[0];
    check(c.finish_reason === 'tool_calls', `stream finish ${c.finish_reason}`);
    check(deltas >= 2, `only ${deltas} tool_call deltas`);
    check(c.message.tool_calls.length >= 1, 'streamed call assembled');
    for (const call of c.message.tool_calls) checkCall(call, ['get_weather']);
  }
}

// Logprobs while the tool parser holds text back: every generated token's entry arrives, on
// the chunks the parser writes, none lost to the held-back text.
async function streamedLogprobs() {
  const stream = await client.chat.completions.create({
    model, messages, tools: [weather, time], temperature: 1, seed: 7, max_tokens: 300,
    tool_choice: { type: 'function', function: { name: 'get_weather' } }, stream: true,
    logprobs: true, stream_options: { include_usage: true },
  });
  let entries = 0, tokens = -1, calls = 0;
  for await (const chunk of stream) {
    if (chunk.usage) tokens = chunk.usage.completion_tokens;
    const c = chunk.choices[0];
    if (!c) continue;
    entries += c.logprobs?.content?.length ?? 0;
    if (c.delta?.tool_calls) ++calls;
  }
  check(calls >= 1, 'no tool call streamed');
  check(tokens > 0 && entries === tokens, `${entries} logprob entries for ${tokens} tokens`);
}

async function responseFormat() {
  let zod = null;
  try {
    zod = await import('zod');
  } catch {
    console.log('zod not installed: response_format checked without zodResponseFormat');
  }
  const schema = {
    type: 'object',
    properties: { answer: { type: 'string', maxLength: 8 }, confidence: { type: 'number', minimum: 0, maximum: 1 } },
    required: ['answer', 'confidence'], additionalProperties: false,
  };
  if (zod) {
    const { zodResponseFormat } = await import('openai/helpers/zod');
    const z = zod.z;
    const Answer = z.object({ answer: z.string().max(8), confidence: z.number().min(0).max(1) });
    for (let seed = 0; seed < 3; ++seed) {
      const r = await client.beta.chat.completions.parse({
        model, messages, temperature: 1, seed, max_tokens: 200,
        response_format: zodResponseFormat(Answer, 'answer'),
      });
      const parsed = r.choices[0].message.parsed;
      check(parsed && Answer.safeParse(parsed).success, `zod rejects ${r.choices[0].message.content}`);
    }
  }
  const r = await client.chat.completions.create({
    model, messages, temperature: 1, max_tokens: 200,
    response_format: { type: 'json_schema', json_schema: { name: 'a', schema, strict: true } },
  });
  const doc = JSON.parse(r.choices[0].message.content);
  check(typeof doc.answer === 'string' && characters(doc.answer) <= 8, `answer ${doc.answer}`);
  check(doc.confidence >= 0 && doc.confidence <= 1, `confidence ${doc.confidence}`);
}

try {
  await responseFormat();
  await required();
  await named();
  await streamed();
  await streamedLogprobs();
  console.log('ok');
} catch (e) {
  console.error('FAIL:', e.message);
  process.exit(1);
}
