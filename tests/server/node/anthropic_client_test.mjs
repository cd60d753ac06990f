// Anthropic's Messages API through the official @anthropic-ai/sdk client against a running
// `vela serve` (random-weight model, Qwen3.5 chat template, qwen3 reasoning and qwen3_coder
// tool parsers, --test-scripted-output: each request's vela_test_script is what the model
// writes). messages.create, messages.stream (text and thinking events, finalMessage()), a tool
// round trip, thinking blocks, stop_sequences, countTokens, and the SDK's error classes. The SDK
// sends the key as x-api-key. Usage: node anthropic_client_test.mjs BASE_URL MODEL API_KEY
import Anthropic from '@anthropic-ai/sdk';

const [baseURL, model, apiKey] = process.argv.slice(2);
const client = new Anthropic({ baseURL, apiKey, timeout: 60000, maxRetries: 0 });

function check(condition, message) {
  if (!condition) throw new Error(message);
}

const script = (...pieces) => ({ pieces, eos: true });
const noThinking = { type: 'disabled' };
const question = [{ role: 'user', content: 'What is the weather in Paris?' }];
const weatherTool = {
  name: 'get_weather',
  description: 'Weather forecast',
  input_schema: {
    type: 'object',
    properties: { city: { type: 'string' }, days: { type: 'integer' } },
    required: ['city'],
  },
};
// A call in the qwen3_coder format the template asks for, its markers split across pieces.
const weatherCall = [
  '<tool_', 'call>\n<function=get_', 'weather>\n<parameter=city>\nParis\n</param',
  'eter>\n<parameter=days>\n', '2\n</parameter>\n</function>\n</tool_call>',
];

function checkUsage(usage, where) {
  check(Number.isInteger(usage.input_tokens) && usage.input_tokens > 0, `${where}: input_tokens`);
  check(Number.isInteger(usage.output_tokens) && usage.output_tokens > 0, `${where}: output_tokens`);
}

// The prompt's whole length: Anthropic counts cache reads apart from input_tokens.
const promptTokens = (usage) => usage.input_tokens + (usage.cache_read_input_tokens ?? 0);

async function plain() {
  const params = {
    model, max_tokens: 64, system: 'Answer briefly.', messages: question, thinking: noThinking,
  };
  const m = await client.messages.create({ ...params, vela_test_script: script('Sunny', ', 20C.') });
  check(m.type === 'message' && m.role === 'assistant', `shape ${JSON.stringify(m)}`);
  check(m.id.startsWith('msg_'), `id ${m.id}`);
  check(m.model === model, `model ${m.model}`);
  check(m.content.length === 1 && m.content[0].type === 'text', JSON.stringify(m.content));
  check(m.content[0].text === 'Sunny, 20C.', `text ${m.content[0].text}`);
  check(m.stop_reason === 'end_turn' && m.stop_sequence === null, `stop ${m.stop_reason}`);
  checkUsage(m.usage, 'create');
  // countTokens renders the same prompt.
  const count = await client.messages.countTokens(params);
  check(count.input_tokens === promptTokens(m.usage),
        `countTokens ${count.input_tokens} vs ${JSON.stringify(m.usage)}`);
  return params;
}

async function streamed(params) {
  const stream = client.messages.stream({ ...params, vela_test_script: script('Stream', 'ed ', 'text.') });
  let text = '';
  const events = [];
  stream.on('text', (delta) => { text += delta; });
  stream.on('streamEvent', (event) => events.push(event.type));
  const m = await stream.finalMessage();
  check(text === 'Streamed text.', `streamed text ${JSON.stringify(text)}`);
  check(m.content.length === 1 && m.content[0].text === text, JSON.stringify(m.content));
  check(m.stop_reason === 'end_turn', `stop ${m.stop_reason}`);
  check(events[0] === 'message_start' && events.at(-1) === 'message_stop', events.join(','));
  check(events.includes('content_block_start') && events.includes('message_delta'), events.join(','));
  checkUsage(m.usage, 'stream');
  const count = await client.messages.countTokens(params);
  check(count.input_tokens === promptTokens(m.usage), `stream usage ${JSON.stringify(m.usage)}`);
}

function checkToolUse(m, where) {
  check(m.stop_reason === 'tool_use', `${where}: stop ${m.stop_reason}`);
  const uses = m.content.filter((b) => b.type === 'tool_use');
  check(uses.length === 1, `${where}: ${JSON.stringify(m.content)}`);
  check(uses[0].id.startsWith('toolu_'), `${where}: id ${uses[0].id}`);
  check(uses[0].name === 'get_weather', `${where}: name ${uses[0].name}`);
  check(JSON.stringify(uses[0].input) === JSON.stringify({ city: 'Paris', days: 2 }),
        `${where}: input ${JSON.stringify(uses[0].input)}`);
  return uses[0];
}

async function toolRoundTrip() {
  const params = { model, max_tokens: 200, messages: question, tools: [weatherTool], thinking: noThinking };
  const m = await client.messages.create({ ...params, vela_test_script: script(...weatherCall) });
  const use = checkToolUse(m, 'create');
  const streamedCall = await client.messages
    .stream({ ...params, vela_test_script: script(...weatherCall) })
    .finalMessage();
  checkToolUse(streamedCall, 'stream');
  // The call and its result go back into the conversation.
  const follow = await client.messages.create({
    ...params,
    messages: [
      ...question,
      { role: 'assistant', content: m.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: '18C, clear' }] },
    ],
    vela_test_script: script('It is 18C and clear.'),
  });
  check(follow.content[0].text === 'It is 18C and clear.', JSON.stringify(follow.content));
  check(follow.stop_reason === 'end_turn', `follow stop ${follow.stop_reason}`);
  // tool_choice any forces a call (the grammar admits the scripted one).
  const forced = await client.messages.create({
    ...params, tool_choice: { type: 'any' }, vela_test_script: script(...weatherCall),
  });
  checkToolUse(forced, 'forced');
}

async function thinking() {
  const params = {
    model, max_tokens: 200, messages: question, thinking: { type: 'enabled', budget_tokens: 100 },
  };
  const pieces = ['Let me', ' think.\n</th', 'ink>\n\nIt is', ' sunny.'];
  const m = await client.messages.create({ ...params, vela_test_script: script(...pieces) });
  check(m.content.length === 2, JSON.stringify(m.content));
  check(m.content[0].type === 'thinking' && m.content[0].thinking === 'Let me think.\n',
        JSON.stringify(m.content[0]));
  check(typeof m.content[0].signature === 'string', 'signature');
  check(m.content[1].type === 'text' && m.content[1].text === 'It is sunny.', JSON.stringify(m.content[1]));
  let thought = '';
  let text = '';
  const stream = client.messages.stream({ ...params, vela_test_script: script(...pieces) });
  stream.on('thinking', (delta) => { thought += delta; });
  stream.on('text', (delta) => { text += delta; });
  const s = await stream.finalMessage();
  check(thought === 'Let me think.\n' && text === 'It is sunny.', `streamed ${thought} / ${text}`);
  check(JSON.stringify(s.content) === JSON.stringify(m.content),
        `stream ${JSON.stringify(s.content)} vs ${JSON.stringify(m.content)}`);
}

async function stopSequences() {
  const params = {
    model, max_tokens: 64, messages: question, thinking: noThinking, stop_sequences: ['END', 'STOP'],
    vela_test_script: script('one two ', 'END three'),
  };
  const m = await client.messages.create(params);
  check(m.stop_reason === 'stop_sequence' && m.stop_sequence === 'END', `stop ${m.stop_reason} ${m.stop_sequence}`);
  check(m.content[0].text === 'one two ', `text ${JSON.stringify(m.content)}`);
  const s = await client.messages.stream(params).finalMessage();
  check(s.stop_reason === 'stop_sequence' && s.stop_sequence === 'END', `stream stop ${s.stop_reason}`);
  check(s.content[0].text === 'one two ', `stream text ${JSON.stringify(s.content)}`);
  const long = await client.messages.create({
    ...params, stop_sequences: undefined, max_tokens: 2,
    vela_test_script: script('one two three four five six'),
  });
  check(long.stop_reason === 'max_tokens', `max_tokens stop ${long.stop_reason}`);
}

async function expectError(promise, Class, type, needle) {
  try {
    await promise;
  } catch (e) {
    check(e instanceof Class, `${e.constructor.name}: ${e.message}`);
    check(e.error?.type === 'error' && e.error?.error?.type === type, `body ${JSON.stringify(e.error)}`);
    check(e.error.error.message.includes(needle), `message ${e.error.error.message}`);
    return;
  }
  throw new Error(`expected ${Class.name}`);
}

async function errors() {
  await expectError(
    client.messages.create({ model, max_tokens: 8, messages: [{ role: 'system', content: 'x' }] }),
    Anthropic.BadRequestError, 'invalid_request_error', "role 'system'");
  await expectError(
    client.messages.create({
      model, max_tokens: 8,
      messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } }] }],
    }),
    Anthropic.BadRequestError, 'invalid_request_error', 'text only');
  await expectError(
    client.messages.countTokens({ model, messages: [{ role: 'user', content: [{ type: 'video' }] }] }),
    Anthropic.BadRequestError, 'invalid_request_error', "'video'");
  await expectError(
    client.messages.create({ model: 'claude-elsewhere', max_tokens: 8, messages: question }),
    Anthropic.NotFoundError, 'not_found_error', 'claude-elsewhere');
  const wrongKey = new Anthropic({ baseURL, apiKey: 'wrong', maxRetries: 0 });
  await expectError(
    wrongKey.messages.create({ model, max_tokens: 8, messages: question }),
    Anthropic.AuthenticationError, 'authentication_error', 'API key');
}

const params = await plain();
await streamed(params);
await toolRoundTrip();
await thinking();
await stopSequences();
await errors();
console.log('all checks passed');
