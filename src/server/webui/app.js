// The chat page of `vela serve` (docs/chat-page.md). It speaks only the server's own API, on the
// page's origin: GET /v1/models, streamed POST /v1/chat/completions and GET /metrics. Model
// output is put into the page as text nodes, never parsed as HTML.
'use strict';

const $ = (id) => document.getElementById(id);
const ui = {
  model: $('model'), clear: $('clear'), settings: $('settings'), system: $('system'),
  temperature: $('temperature'), topP: $('top-p'), maxTokens: $('max-tokens'),
  thinking: $('thinking'), apiKey: $('api-key'), conversation: $('conversation'),
  answerStats: $('answer-stats'), serverStats: $('server-stats'), composer: $('composer'),
  prompt: $('prompt'), send: $('send'),
};

const state = {
  model: null,     // the served model's id, from /v1/models
  history: [],     // finished turns sent back with the next message (never the reasoning)
  controller: null, // aborts the running request (Stop)
  modelNeedsKey: false,
};

const kSettingsKey = 'vela.chat.settings';
const kApiKeyKey = 'vela.chat.apiKey';
const kSettingFields = ['system', 'temperature', 'topP', 'maxTokens', 'thinking'];

// --- Settings: sampling in localStorage; the API key only for this tab (sessionStorage). ---

function loadSettings() {
  try {
    const saved = JSON.parse(localStorage.getItem(kSettingsKey) || '{}');
    for (const name of kSettingFields) {
      if (!(name in saved)) continue;
      if (ui[name].type === 'checkbox') ui[name].checked = Boolean(saved[name]);
      else ui[name].value = String(saved[name]);
    }
    ui.apiKey.value = sessionStorage.getItem(kApiKeyKey) || '';
  } catch { /* storage unavailable (private mode): the defaults stay */ }
}

function saveSettings() {
  const saved = {};
  for (const name of kSettingFields)
    saved[name] = ui[name].type === 'checkbox' ? ui[name].checked : ui[name].value;
  try {
    localStorage.setItem(kSettingsKey, JSON.stringify(saved));
    sessionStorage.setItem(kApiKeyKey, ui.apiKey.value.trim());
  } catch { /* not persisted; the fields still apply */ }
}

// A number field's value, or undefined when blank (the server's default then applies).
function numberField(input) {
  const text = input.value.trim();
  if (text === '') return undefined;
  const value = Number(text);
  return Number.isFinite(value) ? value : undefined;
}

function apiHeaders(withBody) {
  const headers = {};
  if (withBody) headers['Content-Type'] = 'application/json';
  const key = ui.apiKey.value.trim();
  if (key) headers.Authorization = `Bearer ${key}`;
  return headers;
}

function askForKey() {
  ui.settings.open = true;
  ui.apiKey.focus();
}

// The message of a failed API response ({"error": {"message": ...}} on this server).
async function errorMessage(res) {
  let message = `HTTP ${res.status}`;
  try {
    const body = await res.json();
    if (body?.error?.message) message += `: ${body.error.message}`;
  } catch { /* not JSON: the status says enough */ }
  if (res.status === 401) {
    message += '. This server needs an API key: enter it under Settings and send again.';
    askForKey();
  }
  return message;
}

// --- The model's name ---

async function loadModel() {
  try {
    const res = await fetch('/v1/models', { headers: apiHeaders(false) });
    if (res.status === 503) {  // still loading
      ui.model.textContent = 'model loading…';
      setTimeout(loadModel, 1000);
      return;
    }
    if (!res.ok) {
      ui.model.textContent = res.status === 401 ? 'API key needed (Settings)' : `HTTP ${res.status}`;
      state.modelNeedsKey = res.status === 401;
      if (state.modelNeedsKey) askForKey();
      return;
    }
    state.modelNeedsKey = false;
    const model = (await res.json()).data?.[0];
    if (!model) return void (ui.model.textContent = 'no model');
    state.model = model.id;
    ui.model.textContent = model.id;
    if (model.max_model_len) {
      ui.model.title = `${model.id}: up to ${model.max_model_len} tokens per request`;
      ui.maxTokens.max = String(model.max_model_len);
    }
  } catch {
    ui.model.textContent = 'server unreachable';
    setTimeout(loadModel, 3000);
  }
}

// --- Server figures from /metrics (Prometheus text; every sample of a name summed) ---

function parseMetrics(text) {
  const sums = {};
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const name = line.match(/^[^{\s]+/)?.[0];
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (name && Number.isFinite(value)) sums[name] = (sums[name] ?? 0) + value;
  }
  return sums;
}

async function refreshMetrics() {
  try {
    const res = await fetch('/metrics', { headers: apiHeaders(false) });
    if (!res.ok) {
      ui.serverStats.textContent = res.status === 401 ? 'Server figures need the API key.' : '';
      return;
    }
    const m = parseMetrics(await res.text());
    const kv = m['vela:kv_cache_usage_perc'];
    ui.serverStats.textContent = [
      `Server: ${m['vela:num_requests_running'] ?? '?'} running`,
      `${m['vela:num_requests_waiting'] ?? '?'} waiting`,
      `KV cache ${kv === undefined ? '?' : (100 * kv).toFixed(1)}%`,
      `${m['vela:generation_tokens_total'] ?? '?'} tokens generated`,
    ].join(' · ');
  } catch { /* the server is away; the next refresh tries again */ }
}

// --- The conversation ---

function scrollToEnd() {
  ui.conversation.scrollTop = ui.conversation.scrollHeight;
}

function addMessage(role, text) {
  const article = document.createElement('article');
  article.className = `message ${role}`;
  const who = document.createElement('div');
  who.className = 'role';
  who.textContent = role === 'user' ? 'You' : state.model ?? 'Assistant';
  const content = document.createElement('div');
  content.className = 'content';
  content.textContent = text;
  article.append(who, content);
  ui.conversation.append(article);
  scrollToEnd();
  return article;
}

// The folded "Reasoning" block of an answer, made on its first reasoning text.
function reasoningText(article) {
  let details = article.querySelector('details.reasoning');
  if (!details) {
    details = document.createElement('details');
    details.className = 'reasoning';
    const summary = document.createElement('summary');
    summary.textContent = 'Reasoning';
    const text = document.createElement('div');
    text.className = 'reasoning-text';
    details.append(summary, text);
    article.querySelector('.content').before(details);
  }
  return details.querySelector('.reasoning-text');
}

function addNote(article, text, isError) {
  const note = document.createElement('div');
  note.className = isError ? 'note error' : 'note';
  note.textContent = text;
  article.append(note);
  scrollToEnd();
}

// The "data:" payloads of a server-sent-event stream, as they arrive.
async function* sseData(res) {
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replaceAll('\r\n', '\n');
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = event.split('\n').filter((l) => l.startsWith('data:'))
                        .map((l) => l.slice(5).trimStart()).join('\n');
      if (data) yield data;
    }
  }
}

function setBusy(controller) {
  state.controller = controller;
  ui.send.textContent = controller ? 'Stop' : 'Send';
  ui.send.classList.toggle('stop', Boolean(controller));
}

// The last answer's speed: tokens after the first over the time from first to last token; when
// they came too close together to time, all tokens over the time since sending.
function showAnswerStats(t, usage, ending) {
  const parts = [];
  if (t.first) parts.push(`first token ${Math.round(t.first - t.sent)} ms`);
  const tokens = usage?.completion_tokens;
  if (tokens) {
    parts.push(`${tokens} tokens`);
    const decodeSeconds = (t.last - t.first) / 1000;
    const rate = tokens > 1 && decodeSeconds >= 0.005 ? (tokens - 1) / decodeSeconds
                                                      : tokens / ((t.last - t.sent) / 1000);
    if (Number.isFinite(rate)) parts.push(`${rate.toFixed(1)} tokens/s`);
  }
  parts.push(ending);
  ui.answerStats.textContent = `Last answer: ${parts.join(' · ')}`;
}

async function sendMessage(text) {
  const userTurn = { role: 'user', content: text };
  addMessage('user', text);
  const article = addMessage('assistant', '');
  const content = article.querySelector('.content');
  article.classList.add('streaming');

  const history = state.history;  // Clear replaces it: a late answer lands in the old one
  const messages = [];
  if (ui.system.value.trim()) messages.push({ role: 'system', content: ui.system.value.trim() });
  messages.push(...history, userTurn);
  const body = {
    model: state.model ?? undefined,
    messages,
    stream: true,
    stream_options: { include_usage: true },
    temperature: numberField(ui.temperature),
    top_p: numberField(ui.topP),
    max_tokens: numberField(ui.maxTokens),
    chat_template_kwargs: { enable_thinking: ui.thinking.checked },
  };
  // Test hook (docs/chat-page.md): the browser test sets window.velaTestScript to script the
  // model's output on a server started with --test-scripted-output. The page never sets it.
  if (window.velaTestScript) body.vela_test_script = window.velaTestScript;

  const controller = new AbortController();
  setBusy(controller);
  const t = { sent: performance.now(), first: 0, last: 0 };
  let answer = '';
  let usage = null;
  let finish = null;
  try {
    const res = await fetch('/v1/chat/completions', {
      method: 'POST', headers: apiHeaders(true), body: JSON.stringify(body),
      signal: controller.signal,
    });
    if (!res.ok) throw new Error(await errorMessage(res));
    for await (const data of sseData(res)) {
      if (data === '[DONE]') break;
      const chunk = JSON.parse(data);
      if (chunk.error) throw new Error(chunk.error.message ?? 'the server reported an error');
      if (chunk.usage) usage = chunk.usage;
      const choice = chunk.choices?.[0];
      if (!choice) continue;
      const delta = choice.delta ?? {};
      if (delta.reasoning_content || delta.content) {
        t.last = performance.now();
        if (!t.first) t.first = t.last;
      }
      if (delta.reasoning_content) reasoningText(article).append(delta.reasoning_content);
      if (delta.content) {
        content.append(delta.content);
        answer += delta.content;
      }
      if (choice.finish_reason) finish = choice.finish_reason;
      scrollToEnd();
    }
    history.push(userTurn, { role: 'assistant', content: answer });
    showAnswerStats(t, usage, `finish: ${finish ?? 'none'}`);
  } catch (error) {
    if (error.name === 'AbortError') {
      // The partial answer stays part of the conversation, as shown.
      if (answer) history.push(userTurn, { role: 'assistant', content: answer });
      addNote(article, 'Stopped.', false);
      showAnswerStats(t, null, 'stopped');
      setTimeout(refreshMetrics, 500);  // by then the server has cancelled the request
    } else {
      addNote(article, error.message, true);
    }
  } finally {
    article.classList.remove('streaming');
    setBusy(null);
    refreshMetrics();
  }
}

function clearConversation() {
  state.controller?.abort();
  state.history = [];
  ui.conversation.replaceChildren();
  ui.answerStats.textContent = '';
}

// --- Wiring ---

ui.composer.addEventListener('submit', (event) => {
  event.preventDefault();
  if (state.controller) {  // Stop: the server cancels the request when the connection closes
    state.controller.abort();
    return;
  }
  const text = ui.prompt.value.trim();
  if (!text) return;
  ui.prompt.value = '';
  sendMessage(text);
});

ui.prompt.addEventListener('keydown', (event) => {
  if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    if (!state.controller) ui.composer.requestSubmit();
  }
});

ui.clear.addEventListener('click', clearConversation);
ui.settings.addEventListener('change', () => {
  saveSettings();
  if (state.modelNeedsKey) loadModel();  // a key was just entered after a 401
});

loadSettings();
loadModel();
refreshMetrics();
setInterval(() => { if (!document.hidden) refreshMetrics(); }, 5000);
