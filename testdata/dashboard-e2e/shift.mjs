// What an operator relies on for a shift (TestBrowserShiftBasics): times
// in the browser's zone with a UTC toggle that is remembered, dark mode
// following the system, a skip link first, and the calls list by
// keyboard (/ search, j/k rows, Enter opens).
//
// Environment: BASE_URL, READER_KEY.
import { run, signIn, check, step, env, ACTION_TIMEOUT_MS, VIEWPORT } from './lib.mjs';

await run('shift', async ({ browser, baseURL }) => {
  // A zone of its own: UTC+05:30, no daylight saving.
  const context = await browser.newContext({ viewport: VIEWPORT, locale: 'en-US', timezoneId: 'Asia/Kolkata' });
  context.setDefaultTimeout(ACTION_TIMEOUT_MS);
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => { errors.push(e); step(`page error: ${e.stack || e}`); });
  await signIn(page, baseURL, env('READER_KEY'));
  await page.goto(`${baseURL}/ui/calls`);

  step('local time');
  const cell = page.locator('tbody#rows tr time').first();
  const utc = await cell.getAttribute('data-utc');
  const shown = await cell.innerText();
  const want = new Date(Date.parse(utc.replace(' ', 'T') + 'Z') + 330 * 60_000).toISOString().replace('T', ' ').replace('Z', '');
  check(shown === want, `a time is shown in the browser's zone (${utc} UTC is ${shown})`);
  check((await page.locator('th [data-tz]').first().innerText()) === 'UTC+05:30', 'the column names the zone');
  await page.getByTestId('tz-toggle').click();
  check((await cell.innerText()) === utc, 'the toggle shows UTC');
  check((await page.locator('th [data-tz]').first().innerText()) === 'UTC', 'the column says UTC');
  await page.reload();
  check((await page.locator('tbody#rows tr time').first().innerText()) === (await page.locator('tbody#rows tr time').first().getAttribute('data-utc')),
    'the choice is remembered');
  await page.getByTestId('tz-toggle').click();

  step('dark mode follows the system');
  await page.emulateMedia({ colorScheme: 'dark' });
  const dark = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  await page.emulateMedia({ colorScheme: 'light' });
  const light = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  check(dark === 'rgb(13, 17, 23)' && light === 'rgb(255, 255, 255)', `dark ${dark}, light ${light}`);

  step('skip link');
  await page.reload();
  await page.keyboard.press('Tab');
  check(await page.evaluate(() => document.activeElement?.getAttribute('data-testid') === 'skip-link'), 'the first Tab reaches the skip link');
  check(await page.getByTestId('skip-link').isVisible(), 'it is visible when focused');
  await page.keyboard.press('Enter');
  check(await page.evaluate(() => document.activeElement?.id === 'main'), 'it moves the focus to the content');

  step('keyboard navigation');
  await page.keyboard.press('/');
  check(await page.evaluate(() => document.activeElement?.name === 'q'), '/ goes to the search');
  await page.keyboard.press('Escape');
  await page.keyboard.press('j');
  await page.keyboard.press('j');
  const second = await page.locator('tbody#rows tr').nth(1).getAttribute('data-call-id');
  check(await page.evaluate((id) => document.activeElement?.closest('tr')?.getAttribute('data-call-id') === id, second), 'j j is the second row');
  await page.keyboard.press('k');
  await page.keyboard.press('j');
  await Promise.all([page.waitForURL(new RegExp(`/ui/calls/${second}$`)), page.keyboard.press('Enter')]);
  check(true, 'Enter opens the call');
  check(errors.length === 0, 'no uncaught error in the page');
  await context.close();
});
