// The browser-test infrastructure itself (TestBrowserSmoke): Chromium
// starts, loads a sign-in page, finds its key field and takes a screenshot.
import { run, check, shot, step } from './lib.mjs';

await run('smoke', async ({ page, baseURL }) => {
  step('open the sign-in page');
  const res = await page.goto(`${baseURL}/ui/signin`);
  check(res !== null && res.ok(), `GET /ui/signin answered ${res?.status()}`);
  check((await page.locator('input[name=key]').count()) === 1, 'the sign-in page has input[name=key]');
  await shot(page, 'signin');
});
