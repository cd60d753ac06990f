// The official openai npm client's Responses API (client.responses) against a running
// `vela serve` with a reasoning parser and a tool-call parser and the scripted-output hook
// (--test-scripted-output: "vela_test_script" is what the model writes): a plain response
// (reasoning item, message, usage), the same streamed (events in order, deltas adding up, the
// stream helper's final response), a function tool round trip (the call, then its output sent
// back as a function_call_output item), text.format json_schema (with zod's zodTextFormat and
// the parse helper when zod is installed), max_output_tokens cutting the answer short, and
// previous_response_id refused with a 400 the client raises as BadRequestError; and the same
// client's chat completions reading reasoning_content, whole and streamed.
// Usage: node responses_client_test.mjs BASE_URL MODEL
import OpenAI from 'openai';

const [baseURL, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: 'unused', timeout: 60000, maxRetries: 0 });

function check(condition, message) {
  if (!condition) throw new Error(message);
}
const show = (v) => JSON.stringify(v);
const script = (...pieces) => ({ pieces, eos: true });

// The template opens the thinking block; the script closes it, split across pieces.
const thinkThenAnswer = script('Let me', ' think.\n</th', 'ink>\n\nThe answer', ' is 4.');

function checkUsage(usage) {
  check(usage && usage.input_tokens > 0 && usage.output_tokens > 0, `usage ${show(usage)}`);
  check(usage.total_tokens === usage.input_tokens + usage.output_tokens, `total ${show(usage)}`);
  check(typeof usage.input_tokens_details.cached_tokens === 'number', 'cached_tokens');
  check(typeof usage.output_tokens_details.reasoning_tokens === 'number', 'reasoning_tokens');
}

async function plain() {
  const r = await client.responses.create({
    model, input: 'What is 2+2?', instructions: 'Be brief.', temperature: 0,
    max_output_tokens: 200, metadata: { run: 'plain' }, vela_test_script: thinkThenAnswer,
  });
  check(r.object === 'response' && r.id.startsWith('resp_'), `id ${r.id}`);
  check(r.status === 'completed', `status ${r.status}`);
  check(r.model === model, `model ${r.model}`);
  check(r.output_text === 'The answer is 4.', `output_text ${show(r.output_text)}`);
  check(r.output.length === 2, `output ${show(r.output)}`);
  const [reasoning, message] = r.output;
  check(reasoning.type === 'reasoning' && reasoning.id.startsWith('rs_'), show(reasoning));
  check(reasoning.content[0].type === 'reasoning_text', show(reasoning));
  check(reasoning.content[0].text === 'Let me think.\n', `reasoning ${show(reasoning)}`);
  check(message.type === 'message' && message.role === 'assistant', show(message));
  check(message.status === 'completed' && message.id.startsWith('msg_'), show(message));
  check(message.content[0].type === 'output_text', show(message));
  check(Array.isArray(message.content[0].annotations), 'annotations');
  check(r.instructions === 'Be brief.', `instructions ${r.instructions}`);
  check(r.metadata.run === 'plain', `metadata ${show(r.metadata)}`);
  check(r.max_output_tokens === 200 && r.temperature === 0, 'echoed parameters');
  check(r.error === null && r.incomplete_details === null, 'no error');
  checkUsage(r.usage);
}

async function streamed() {
  const stream = await client.responses.create({
    model, input: 'What is 2+2?', temperature: 0, stream: true,
    vela_test_script: thinkThenAnswer,
  });
  const types = [];
  let text = '', reasoning = '', completed = null, sequence = 0;
  for await (const event of stream) {
    check(event.sequence_number === sequence++, `sequence ${event.sequence_number}`);
    types.push(event.type);
    if (event.type === 'response.output_text.delta') text += event.delta;
    if (event.type === 'response.reasoning_text.delta') reasoning += event.delta;
    if (event.type === 'response.completed') completed = event.response;
  }
  check(types[0] === 'response.created' && types[1] === 'response.in_progress', show(types));
  check(types.at(-1) === 'response.completed', show(types));
  check(text === 'The answer is 4.', `streamed text ${show(text)}`);
  check(reasoning === 'Let me think.\n', `streamed reasoning ${show(reasoning)}`);
  check(completed.status === 'completed', `status ${completed.status}`);
  check(completed.output.length === 2, show(completed.output));
  check(completed.output[1].content[0].text === text, 'completed carries the text');
  checkUsage(completed.usage);

  // The stream helper assembles the same response from the events.
  const helper = client.responses.stream({
    model, input: 'What is 2+2?', temperature: 0, vela_test_script: thinkThenAnswer,
  });
  let snapshots = 0;
  helper.on('response.output_text.delta', (e) => { snapshots += e.snapshot.length > 0; });
  const final = await helper.finalResponse();
  // (openai-node 4.x sets output_text on the helper's final response only for parse requests.)
  const finalMessage = final.output.find((o) => o.type === 'message');
  check(finalMessage?.content[0].text === 'The answer is 4.', `helper final ${show(final.output)}`);
  check(snapshots > 0, 'helper text snapshots');
}

const weather = {
  type: 'function', name: 'get_weather', description: 'Weather forecast', strict: false,
  parameters: {
    type: 'object',
    properties: { city: { type: 'string' }, days: { type: 'integer' } },
    required: ['city'],
  },
};
// The Qwen3.5 template's call format (qwen3_coder), its markers split across pieces.
const weatherCall = script('Need the weather.', '</think>', '\n\n<tool_',
  'call>\n<function=get_', 'weather>\n<parameter=city>\nParis\n</param',
  'eter>\n<parameter=days>\n', '2\n</parameter>\n</function>\n</tool_call>');

async function toolRoundTrip() {
  const input = [{ role: 'user', content: 'Weather in Paris?' }];
  const r = await client.responses.create({
    model, input, tools: [weather], temperature: 0, vela_test_script: weatherCall,
  });
  check(r.status === 'completed', `status ${r.status}`);
  check(r.tools[0].name === 'get_weather' && r.tools[0].type === 'function', show(r.tools));
  const calls = r.output.filter((o) => o.type === 'function_call');
  check(calls.length === 1, `calls ${show(r.output)}`);
  const call = calls[0];
  check(call.name === 'get_weather' && call.call_id.startsWith('call_'), show(call));
  check(call.id.startsWith('fc_') && call.status === 'completed', show(call));
  check(show(JSON.parse(call.arguments)) === show({ city: 'Paris', days: 2 }), call.arguments);
  check(r.output[0].type === 'reasoning', show(r.output));
  check(r.output_text === '', `output_text ${show(r.output_text)}`);

  // The client sends the whole conversation back: its input, the output items, the result.
  const follow = await client.responses.create({
    model, tools: [weather], temperature: 0,
    input: [...input, ...r.output,
      { type: 'function_call_output', call_id: call.call_id, output: '{"temp": 21}' }],
    vela_test_script: script('Got it.', '</think>', 'It is 21 degrees.'),
  });
  check(follow.output_text === 'It is 21 degrees.', `follow-up ${show(follow.output_text)}`);

  // Streamed, the call's arguments arrive as deltas that add up.
  const stream = await client.responses.create({
    model, input, tools: [weather], temperature: 0, stream: true, vela_test_script: weatherCall,
  });
  let args = '', done = null, added = null;
  for await (const event of stream) {
    if (event.type === 'response.output_item.added' && event.item.type === 'function_call')
      added = event.item;
    if (event.type === 'response.function_call_arguments.delta') args += event.delta;
    if (event.type === 'response.function_call_arguments.done') done = event.arguments;
  }
  check(added && added.name === 'get_weather', `added ${show(added)}`);
  check(args === done, `deltas ${show(args)} vs done ${show(done)}`);
  check(show(JSON.parse(done)) === show({ city: 'Paris', days: 2 }), done);
}

async function jsonSchema() {
  const schema = {
    type: 'object',
    properties: { n: { type: 'integer' }, ok: { type: 'boolean' } },
    required: ['n', 'ok'],
    additionalProperties: false,
  };
  const r = await client.responses.create({
    model, input: 'Answer in JSON', temperature: 0,
    text: { format: { type: 'json_schema', name: 'answer', schema, strict: true } },
    // The grammar takes the properties in the order the server's JSON keeps them
    // (alphabetical), so the script writes them so.
    vela_test_script: script('Thinking.', '</think>', '{"n":3,"ok":true}'),
  });
  check(r.text.format.type === 'json_schema' && r.text.format.name === 'answer', show(r.text));
  check(show(JSON.parse(r.output_text)) === show({ n: 3, ok: true }), r.output_text);

  let zod = null;
  try {
    zod = await import('zod');
  } catch {
    console.log('zod not installed: skipping zodTextFormat');
  }
  if (zod) {
    const { zodTextFormat } = await import('openai/helpers/zod');
    const Answer = zod.z.object({ n: zod.z.number().int(), ok: zod.z.boolean() });
    const parsed = await client.responses.parse({
      model, input: 'Answer in JSON', temperature: 0,
      text: { format: zodTextFormat(Answer, 'answer') },
      vela_test_script: script('Thinking.', '</think>', '{"n":-2,"ok":false}'),
    });
    check(show(parsed.output_parsed) === show({ n: -2, ok: false }), show(parsed.output_parsed));
  }
}

async function cutShort() {
  const r = await client.responses.create({
    model, input: 'Tell a story', temperature: 0, max_output_tokens: 3,
    vela_test_script: script('Once upon a time there was a very long story'),
  });
  check(r.status === 'incomplete', `status ${r.status}`);
  check(r.incomplete_details.reason === 'max_output_tokens', show(r.incomplete_details));
}

async function previousResponseRefused() {
  try {
    await client.responses.create({ model, input: 'Hi', previous_response_id: 'resp_123' });
  } catch (e) {
    check(e instanceof OpenAI.BadRequestError, `error ${e}`);
    check(e.status === 400 && e.param === 'previous_response_id', `param ${e.param}`);
    check(e.message.includes('input'), e.message);
    return;
  }
  throw new Error('previous_response_id was accepted');
}

// The same client's chat completions read the thinking apart, as reasoning_content.
async function chatReasoningContent() {
  const c = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: 'What is 2+2?' }], temperature: 0,
    vela_test_script: thinkThenAnswer,
  });
  const m = c.choices[0].message;
  check(m.reasoning_content === 'Let me think.\n', `reasoning_content ${show(m)}`);
  check(m.content === 'The answer is 4.', `content ${show(m)}`);
  const stream = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: 'What is 2+2?' }], temperature: 0, stream: true,
    vela_test_script: thinkThenAnswer,
  });
  let reasoning = '', content = '';
  for await (const chunk of stream) {
    const delta = chunk.choices[0]?.delta ?? {};
    reasoning += delta.reasoning_content ?? '';
    content += delta.content ?? '';
  }
  check(reasoning === 'Let me think.\n', `streamed reasoning_content ${show(reasoning)}`);
  check(content === 'The answer is 4.', `streamed content ${show(content)}`);
}

for (const [name, test] of Object.entries({
  chatReasoningContent,
  plain, streamed, toolRoundTrip, jsonSchema, cutShort, previousResponseRefused,
})) {
  try {
    await test();
  } catch (e) {
    console.error(`${name}: ${e.stack ?? e}`);
    process.exit(1);
  }
}
console.log('all checks passed');
