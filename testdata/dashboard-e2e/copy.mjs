// A call page's copy buttons (TestBrowserCopyCall): "Copy as JSON",
// "Copy as command" and "Copy as curl" put the call's request on the clipboard, read back
// here (the context is granted clipboard permissions), and none holds
// a secret argument's value.
//
// Environment: READER_KEY (a key of tenant acme), CALL_ID (the call),
// WANT_JSON, WANT_COMMAND and WANT_CURL (the texts expected), SECRET (a
// value that must appear in none).
import { run, signIn, check, step } from './lib.mjs';

await run('copy', async ({ baseURL, env, newPage }) => {
  const page = await newPage({ permissions: ['clipboard-read', 'clipboard-write'] });
  await signIn(page, baseURL, env('READER_KEY'));
  await page.goto(`${baseURL}/ui/calls/${encodeURIComponent(env('CALL_ID'))}`);
  const secret = env('SECRET');
  for (const [testid, want, what] of [['copy-json', 'WANT_JSON', 'the request as JSON'], ['copy-command', 'WANT_COMMAND', 'the toolctl command'],
    ['copy-curl', 'WANT_CURL', 'the curl command']]) {
    step(`click ${testid}`);
    await page.getByTestId(testid).click();
    await page.getByTestId('copy-status').filter({ hasText: `Copied ${what}.` }).waitFor();
    const got = await page.evaluate(() => navigator.clipboard.readText());
    step(`clipboard: ${JSON.stringify(got)}`);
    check(got === env(want), `${testid} copied ${JSON.stringify(env(want))}`);
    check(!got.includes(secret), `${testid} copied no secret`);
  }
});
