// The web UI in a real headless Chromium (Debian's `chromium`, driven by playwright-core;
// nothing is downloaded). Run by crates/contract-tests/tests/ui.rs against two harness
// processes: ECHO_BASE (the echo model) and SCRIPT_BASE (a scripted model that streams slowly
// and shows an A2UI surface). On a failure the page's screenshot is kept in ARTIFACTS.
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

const echoBase = process.env.ECHO_BASE;
const scriptBase = process.env.SCRIPT_BASE;
const artifacts = process.env.ARTIFACTS ?? 'target/ui-test-artifacts';
const executablePath = process.env.CHROMIUM ?? '/usr/bin/chromium';
if (!echoBase || !scriptBase) throw new Error('ECHO_BASE and SCRIPT_BASE name the harnesses under test');

const browser = await chromium.launch({ executablePath, headless: true, args: ['--no-sandbox'] });
const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
const page = await context.newPage();
const problems = [];
page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
page.on('console', (m) => {
  if (m.type() === 'error' && !/Failed to load resource/.test(m.text())) problems.push(`console: ${m.text()}`);
});

let step = 'start';
function check(condition, what) {
  if (!condition) throw new Error(`${step}: ${what}`);
}
const timeline = () => page.locator('ol.timeline');
const agentTexts = () => timeline().locator('li.message.agent:not(.streaming) .text').allTextContents();
const userEntries = () => timeline().locator('li.message.user').allTextContents();

async function sendText(text) {
  await page.getByLabel('Message', { exact: true }).fill(text);
  await page.getByLabel('Message', { exact: true }).press('Enter');
}

try {
  // ------------------------------------------------------------ who you are, once
  step = 'who you are';
  await page.goto(`${echoBase}/ui`);
  check(page.url().endsWith('/ui/'), `/ui redirects to /ui/ (${page.url()})`);
  await page.getByLabel('Participant id').fill('alice');
  await page.getByRole('button', { name: 'Continue' }).click();
  await page.getByText('You are alice').waitFor();
  await page.reload();
  await page.getByText('You are alice').waitFor();
  check((await page.getByLabel('Participant id').count()) === 0, 'the participant id is remembered');

  // ------------------------------------------------------------ a conversation, streamed echo
  step = 'conversation';
  await page.getByRole('button', { name: 'New conversation' }).click();
  await sendText('hello from the browser');
  await timeline().locator('li.message.agent .text', { hasText: 'echo: hello from the browser' }).waitFor();
  await page.waitForURL(/#\/tasks\//);
  const echoTask = decodeURIComponent(page.url().split('#/tasks/')[1]);
  check((await userEntries()).filter((t) => t.includes('hello from the browser')).length === 1, 'the message shows once');
  await page.locator('.conv-head .status', { hasText: 'input required' }).waitFor();
  // The task list has it, with its state and participants.
  const item = page.locator(`.task-list a[data-task="${echoTask}"]`);
  await item.waitFor();
  await item.locator('.badge', { hasText: 'input required' }).waitFor();
  check((await item.locator('.people').textContent()).includes('alice'), 'the list names the participants');

  // /help is usable from the conversation.
  step = 'help';
  await page.getByRole('button', { name: 'Help' }).click();
  await timeline().locator('li.message.agent .text', { hasText: '/status' }).waitFor();

  // ------------------------------------------------------------ cancel, and the list follows
  step = 'cancel';
  await page.getByRole('button', { name: 'Cancel task' }).click();
  await page.locator('.conv-head .status', { hasText: 'canceled' }).waitFor();
  await item.locator('.badge', { hasText: 'canceled' }).waitFor({ timeout: 15000 });
  check(await page.getByLabel('Message', { exact: true }).isDisabled(), 'an ended task takes no message');
  // Filtering by state.
  await page.getByLabel('Filter tasks by state').selectOption('TASK_STATE_WORKING');
  await page.locator('.task-list .empty').waitFor();
  await page.getByLabel('Filter tasks by state').selectOption('TASK_STATE_CANCELED');
  await item.waitFor();
  await page.getByLabel('Filter tasks by state').selectOption('');

  // ------------------------------------------------------------ errors as the server words them
  step = 'errors';
  await page.goto(`${echoBase}/ui/#/tasks/no-such-task`);
  await page.getByRole('alert').filter({ hasText: 'task not found: no-such-task' }).waitFor();

  // ------------------------------------------------------------ reload mid-stream
  step = 'reload mid-stream';
  await page.goto(`${scriptBase}/ui/`);
  await page.getByLabel('Participant id').fill('bob');
  await page.getByRole('button', { name: 'Continue' }).click();
  await page.getByRole('button', { name: 'New conversation' }).click();
  await sendText('slow please');
  await timeline().locator('li.streaming .text', { hasText: 'two' }).waitFor();
  await page.waitForURL(/#\/tasks\//);
  await page.reload();
  const whole = 'one two three four five six seven eight';
  await timeline().locator('li.message.agent .text', { hasText: whole }).waitFor({ timeout: 20000 });
  const replies = await agentTexts();
  check(replies.filter((t) => t.includes('one two')).length === 1, `one reply after the reload: ${JSON.stringify(replies)}`);
  check(replies.includes(whole), `the reply whole, no word twice: ${JSON.stringify(replies)}`);
  check((await timeline().locator('li.streaming').count()) === 0, 'no streaming copy is left');
  check((await userEntries()).filter((t) => t.includes('slow please')).length === 1, 'the message once');

  // ------------------------------------------------------------ an A2UI surface and its action
  step = 'surface';
  await sendText('a form please');
  const surface = timeline().locator('a2ui-surface');
  await surface.waitFor();
  await surface.getByText('Ready?').waitFor();
  await timeline().locator('li.message.agent .text', { hasText: 'Press it.' }).waitFor();
  check((await surface.count()) === 1, 'one surface');
  await surface.getByRole('button', { name: 'Go' }).click();
  await timeline().locator('li.message.agent .text', { hasText: 'You pressed go.' }).waitFor();
  await timeline().locator('li.message.user', { hasText: 'pressed “go” on s1' }).waitFor();
  // After a reload the surface is there once, replayed from the log.
  await page.reload();
  await timeline().locator('li.message.agent .text', { hasText: 'You pressed go.' }).waitFor();
  await timeline().locator('a2ui-surface').getByText('Ready?').waitFor();
  check((await timeline().locator('a2ui-surface').count()) === 1, 'one surface after the reload');

  step = 'page errors';
  check(problems.length === 0, problems.join('\n'));
  if (process.env.SCREENSHOT) await page.screenshot({ path: process.env.SCREENSHOT });
  console.log('the UI passed every step');
} catch (e) {
  mkdirSync(artifacts, { recursive: true });
  const shot = join(artifacts, `failure-${Date.now()}.png`);
  await page.screenshot({ path: shot, fullPage: true }).catch(() => {});
  console.error(`${e.stack ?? e}\nscreenshot: ${shot}\n${problems.join('\n')}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
