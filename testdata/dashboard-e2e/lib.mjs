// Shared helpers of the dashboard's browser scenarios. A scenario is a
// script run by runBrowser in internal/dashboard/browser_test.go:
//
//   import { run, signIn, shot, check, step } from './lib.mjs';
//
//   await run('example', async ({ page, baseURL, env }) => {
//     await signIn(page, baseURL, env('ADMIN_KEY'));
//     step('open the calls page');
//     await page.goto(`${baseURL}/ui/calls`);
//     check(await page.getByRole('table').count() === 1, 'the calls page shows a table');
//     await shot(page, 'calls');
//   });
//
// run launches Debian's chromium through playwright-core, hands the body a
// page (1280x800), and exits non-zero on any failure — a thrown error, a
// failed check, an uncaught error in the page's JavaScript, or the global
// timeout — after closing the browser.
//
// Environment (set by runBrowser; the test adds its own, such as API keys):
//   BASE_URL    the server, e.g. http://127.0.0.1:PORT (no trailing slash)
//   SHOT_DIR    where shot() writes its PNGs
//   TIMEOUT_MS  bound on the whole scenario (default 60000)
//   CHROMIUM    the browser (default /usr/bin/chromium)

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];

export const VIEWPORT = { width: 1280, height: 800 };

// Bound on each single Playwright action or wait (a click, waitForURL, ...),
// so that a missing element fails with its selector long before TIMEOUT_MS.
export const ACTION_TIMEOUT_MS = 10_000;

const started = Date.now();

// step logs what the scenario is doing, with the time since it started.
export function step(msg) {
  const s = ((Date.now() - started) / 1000).toFixed(2);
  console.log(`[${s.padStart(6)}s] ${msg}`);
}

// check throws (failing the scenario) unless cond is true.
export function check(cond, msg) {
  if (!cond) throw new Error(`check failed: ${msg}`);
  step(`ok: ${msg}`);
}

// env returns the environment variable name; without a fallback, a missing
// or empty one is an error.
export function env(name, fallback) {
  const v = process.env[name];
  if (v !== undefined && v !== '') return v;
  if (fallback !== undefined) return fallback;
  throw new Error(`environment variable ${name} is not set`);
}

// launch starts the browser with the flags of DESIGN §12.
export async function launch() {
  const executablePath = env('CHROMIUM', '/usr/bin/chromium');
  const browser = await chromium.launch({ executablePath, args: CHROMIUM_ARGS, headless: true });
  step(`launched ${executablePath} ${browser.version()}`);
  return browser;
}

const pageErrors = [];

// newPage opens a page in a context of its own (its own cookies: a second
// user), with the fixed viewport, the per-action timeout, and the page's
// console errors, uncaught errors, failed requests and 4xx/5xx responses
// logged. An uncaught error fails the scenario at its end (unless run's
// allowPageErrors). options are added to the context's (playwright's
// browser.newContext), e.g. { bypassCSP: true } or { colorScheme: 'dark' }.
export async function newPage(browser, options = {}) {
  const context = await browser.newContext({ viewport: VIEWPORT, deviceScaleFactor: 1, locale: 'en-US', timezoneId: 'UTC', ...options });
  context.setDefaultTimeout(ACTION_TIMEOUT_MS);
  const page = await context.newPage();
  page.on('console', (m) => {
    // A failed load is logged below, with its URL.
    if (m.type() === 'error' && m.text().startsWith('Failed to load resource')) return;
    if (m.type() === 'error' || m.type() === 'warning') step(`page console ${m.type()}: ${m.text()}`);
  });
  page.on('pageerror', (e) => {
    pageErrors.push(e);
    step(`page error: ${e.stack || e}`);
  });
  page.on('requestfailed', (r) => step(`request failed: ${r.method()} ${r.url()}: ${r.failure()?.errorText}`));
  page.on('response', (r) => {
    if (r.status() >= 400) step(`response ${r.status()}: ${r.request().method()} ${r.url()}`);
  });
  return page;
}

// signIn signs in with an API key on the dashboard's sign-in page: it
// submits the form, waits for the page it leads to, and fails (with that
// page's text) unless it is a page under /ui/ other than the sign-in page.
export async function signIn(page, baseURL, key) {
  step(`sign in at ${baseURL}/ui/signin`);
  await page.goto(`${baseURL}/ui/signin`);
  await page.fill('input[name=key]', key);
  const loaded = page.waitForEvent('load');
  await page.click('button[type=submit]');
  await loaded;
  const prefix = `${baseURL}/ui/`;
  const url = page.url();
  if (!url.startsWith(prefix) || url.startsWith(`${prefix}signin`)) {
    throw new Error(`sign-in did not lead into the dashboard: ${await describe(page)}`);
  }
  step(`signed in: ${url}`);
}

// shot writes a full-page screenshot of page to $SHOT_DIR/<name>.png
// (animations stopped, caret hidden: the same pixels every run).
export async function shot(page, name) {
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(name)) throw new Error(`shot: bad name ${JSON.stringify(name)}`);
  const dir = env('SHOT_DIR');
  mkdirSync(dir, { recursive: true });
  const path = join(dir, `${name}.png`);
  await page.screenshot({ path, fullPage: true, animations: 'disabled', caret: 'hide' });
  step(`screenshot ${path}`);
  return path;
}

// describe returns what a failure report needs from a page: its URL, title
// and the start of its text.
async function describe(page) {
  try {
    const text = (await page.locator('body').innerText({ timeout: 2000 })).replace(/\s+/g, ' ').trim();
    return `url ${page.url()}, title ${JSON.stringify(await page.title())}, text: ${text.slice(0, 1500)}`;
  } catch (e) {
    return `url ${page.url()} (no text: ${e.message.split('\n')[0]})`;
  }
}

// run runs a scenario: body({ browser, page, baseURL, env, newPage }) with
// a browser and a first page, bounded by TIMEOUT_MS. It sets the exit code
// (0 only when body returned and nothing failed) and closes the browser.
// body's newPage(options) opens a further page (options as newPage's).
export async function run(name, body, { allowPageErrors = false } = {}) {
  const timeoutMs = Number(env('TIMEOUT_MS', '60000'));
  // Should closing the browser itself hang, the process still ends.
  const hardStop = setTimeout(() => {
    console.error(`${name}: still running ${timeoutMs + 10_000} ms after the start; exiting`);
    process.exit(3);
  }, timeoutMs + 10_000);
  hardStop.unref();

  let browser;
  let page;
  let timer;
  try {
    const baseURL = env('BASE_URL').replace(/\/+$/, '');
    step(`scenario ${name} against ${baseURL} (bound ${timeoutMs} ms)`);
    const timedOut = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`scenario ${name} timed out after ${timeoutMs} ms`)), timeoutMs);
    });
    await Promise.race([
      (async () => {
        browser = await launch();
        page = await newPage(browser);
        await body({ browser, page, baseURL, env, newPage: (options) => newPage(browser, options) });
      })(),
      timedOut,
    ]);
    if (pageErrors.length > 0 && !allowPageErrors) {
      throw new Error(`${pageErrors.length} uncaught error(s) in the page's JavaScript (logged above)`);
    }
    step(`scenario ${name} passed`);
  } catch (e) {
    process.exitCode = 1;
    console.error(`FAIL ${name}: ${e.stack || e}`);
    if (page) console.error(`the page at the failure: ${await describe(page)}`);
  } finally {
    clearTimeout(timer);
    if (browser) {
      await Promise.race([
        browser.close().catch((e) => console.error(`closing the browser: ${e.message}`)),
        new Promise((r) => setTimeout(r, 5000).unref()),
      ]);
    }
  }
}
