// Drives the chat page of `vela serve` (src/server/webui/) in Debian's Chromium with
// playwright-core: the model's name, a streamed answer with its reasoning folded, the speed
// figures, a second turn that sends the first back (thinking off), and Stop during a long
// generation; every request the page makes must stay on the server's origin. Screenshots go to
// SCREENSHOT_DIR. The server runs with --test-scripted-output, so the page's test hook
// (window.velaTestScript, docs/chat-page.md) decides what the model writes.
// Run by tests/server/webui_browser_test.cpp:
//   node chat_page_test.mjs BASE_URL MODEL_NAME SCREENSHOT_DIR
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

import { chromium } from 'playwright-core';

const [baseUrl, modelName, shotDir] = process.argv.slice(2);
if (!shotDir) {
  console.error('usage: node chat_page_test.mjs BASE_URL MODEL_NAME SCREENSHOT_DIR');
  process.exit(2);
}
mkdirSync(shotDir, { recursive: true });
const origin = new URL(baseUrl).origin;
const kTimeout = 30_000;

function check(condition, what) {
  if (!condition) throw new Error(`check failed: ${what}`);
  console.log(`ok: ${what}`);
}

// A sum of the server's /metrics samples named `name` whose labels contain `label`.
async function metric(name, label = '') {
  const text = await (await fetch(`${origin}/metrics`)).text();
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) || !line.includes(label)) continue;
    sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

async function waitFor(what, predicate, timeoutMs = kTimeout) {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  // Each launch runs on a fresh temporary profile; these flags keep Chromium itself quiet.
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
         '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
  const context = await browser.newContext({ viewport: { width: 1000, height: 760 } });
  const requests = [];
  context.on('request', (request) => requests.push(request));
  const page = await context.newPage();
  page.setDefaultTimeout(kTimeout);
  const pageErrors = [];
  page.on('pageerror', (error) => pageErrors.push(error.message));
  page.on('console', (message) => {
    if (/Content Security Policy/i.test(message.text())) pageErrors.push(message.text());
  });
  const chatBodies = () => requests.filter((r) => r.url().endsWith('/v1/chat/completions'))
                                   .map((r) => r.postDataJSON());

  // --- The page loads and names the model ---
  await page.goto(`${origin}/`);
  await page.locator('#model', { hasText: modelName }).waitFor();
  check(await page.textContent('#model') === modelName, `the model name "${modelName}" shows`);

  // --- One answer: thinking, then the answer, the end marker split across pieces ---
  await page.evaluate(() => {
    window.velaTestScript = { pieces: ['Let me', ' think.\n</th', 'ink>\n\nThe answer', ' is 4.'],
                              eos: true };
  });
  await page.fill('#prompt', 'What is 2 + 2?');
  await page.click('#send');
  const first = page.locator('article.message.assistant').nth(0);
  await first.locator('.content', { hasText: 'The answer is 4.' }).waitFor();
  await page.locator('#send', { hasText: 'Send' }).waitFor();
  check(await first.locator('.content').textContent() === 'The answer is 4.',
        'the streamed answer shows, without its reasoning');
  const details = first.locator('details.reasoning');
  check(await details.count() === 1, 'the answer has one Reasoning block');
  check(await details.evaluate((d) => !d.open), 'the Reasoning block is folded');
  const reasoning = details.locator('.reasoning-text');
  check(await reasoning.textContent() === 'Let me think.\n', 'it holds the scripted reasoning');
  check(!(await reasoning.isVisible()), 'the folded reasoning is hidden');
  const body = chatBodies()[0];
  check(body.stream === true && body.stream_options?.include_usage === true,
        'the request streams with usage');
  check(body.chat_template_kwargs?.enable_thinking === true, 'thinking is on by default');

  const stats = await page.locator('#answer-stats', { hasText: 'tokens/s' }).textContent();
  const speed = stats.match(/first token (\d+) ms · (\d+) tokens · ([\d.]+) tokens\/s · finish: stop/);
  check(speed && Number(speed[2]) > 0 && Number(speed[3]) > 0,
        `the status line gives the answer's speed: "${stats}"`);
  await page.locator('#server-stats', { hasText: 'tokens generated' }).waitFor();
  const server = await page.textContent('#server-stats');
  check(/\d+ running · \d+ waiting · KV cache [\d.]+% · [1-9]\d* tokens generated/.test(server),
        `the status line gives the server's /metrics figures: "${server}"`);
  await page.screenshot({ path: join(shotDir, 'answer.png') });

  await details.locator('summary').click();
  check(await reasoning.isVisible(), 'a click unfolds the reasoning');

  // --- A second turn, thinking off: the first turn goes back without its reasoning ---
  await page.click('#settings > summary');
  await page.uncheck('#thinking');
  await page.evaluate(() => { window.velaTestScript = { pieces: ['Six.'], eos: true }; });
  await page.fill('#prompt', 'And 3 + 3?');
  await page.press('#prompt', 'Enter');
  const second = page.locator('article.message.assistant').nth(1);
  await second.locator('.content', { hasText: 'Six.' }).waitFor();
  await page.locator('#send', { hasText: 'Send' }).waitFor();
  check(await second.locator('details.reasoning').count() === 0, 'no reasoning with thinking off');
  const turn2 = chatBodies()[1];
  check(JSON.stringify(turn2.messages) === JSON.stringify([
    { role: 'user', content: 'What is 2 + 2?' },
    { role: 'assistant', content: 'The answer is 4.' },
    { role: 'user', content: 'And 3 + 3?' },
  ]), 'the second request carries the first turn, without its reasoning');
  check(turn2.chat_template_kwargs?.enable_thinking === false, 'the thinking switch is sent');

  // --- A long generation, stopped: the script ends without EOS and the model goes on ---
  await page.check('#thinking');
  await page.fill('#max-tokens', '16000');
  await page.evaluate(() => { window.velaTestScript = { pieces: ['Thinking at length:'], eos: false }; });
  const abortedBefore = await metric('vela:request_success_total', 'finished_reason="abort"');
  await page.fill('#prompt', 'Write a long story.');
  await page.click('#send');
  const third = page.locator('article.message.assistant').nth(2);
  const thinking = third.locator('.reasoning-text');
  const length = async () => ((await thinking.count()) ? (await thinking.textContent()).length : 0);
  await waitFor('the long answer to start', async () => (await length()) > 40);
  const before = await length();
  await waitFor('the long answer to grow', async () => (await length()) > before);
  check(await page.textContent('#send') === 'Stop', 'the button turns into Stop while it streams');
  check(await metric('vela:num_requests_running') === 1, 'the server is generating');
  await page.click('#send');
  await page.locator('#send', { hasText: 'Send' }).waitFor();
  check(await page.textContent('#send') === 'Send', 'Stop ends it: the button says Send again');
  await third.locator('.note', { hasText: 'Stopped.' }).waitFor();
  check(/stopped/.test(await page.textContent('#answer-stats')), 'the status line says stopped');
  await waitFor('the server to cancel the request',
                async () => (await metric('vela:num_requests_running')) === 0);
  check(await metric('vela:request_success_total', 'finished_reason="abort"') === abortedBefore + 1,
        'the server counted the request as aborted');
  check(chatBodies()[2].max_tokens === 16000, 'the max tokens setting is sent');
  await page.locator('#server-stats', { hasText: /^Server: 0 running/ }).waitFor();
  check(/^Server: 0 running/.test(await page.textContent('#server-stats')),
        'the page\'s server figures show no running request');
  const stoppedLength = await length();
  await page.waitForTimeout(300);
  check(await length() === stoppedLength, 'no text arrives after Stop');
  await page.screenshot({ path: join(shotDir, 'stopped.png') });

  // --- A phone-sized screen: nothing wider than the screen ---
  await page.setViewportSize({ width: 390, height: 844 });
  check(await page.evaluate(() => document.documentElement.scrollWidth) <= 390,
        'the page fits a 390 px wide screen');
  await page.screenshot({ path: join(shotDir, 'phone.png') });

  // --- Nothing left the origin ---
  const elsewhere = requests.map((r) => r.url()).filter((url) => new URL(url).origin !== origin);
  check(elsewhere.length === 0, `every request stays on ${origin} (${requests.length} requests)` +
                                (elsewhere.length ? `; elsewhere: ${elsewhere.join(', ')}` : ''));
  const paths = new Set(requests.map((r) => new URL(r.url()).pathname));
  for (const path of ['/', '/webui/app.js', '/webui/style.css', '/v1/models', '/metrics'])
    check(paths.has(path), `the page requested ${path}`);
  check(pageErrors.length === 0, `no script errors or CSP violations ${pageErrors.join('; ')}`);
  console.log('all checks passed');
} finally {
  await browser.close();
}
