// Live updates of the approvals, dead-letter and pools pages
// (TestBrowserLiveRegions): each page, left open, shows what happens
// after it was loaded — a call parked for approval, a new dead letter, a
// pool's new calls — without being reloaded; paused, it stays as it is.
//
// Environment: BASE_URL, API_URL, ADMIN_KEY (makes the calls), KEY (the
// viewer: installation, admin and approve scopes).
import { run, signIn, check, step, env } from './lib.mjs';

async function submit(tool, args) {
  const res = await fetch(`${env('API_URL')}/toolwire.v1.DispatcherService/Submit`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${env('ADMIN_KEY')}` },
    body: JSON.stringify({ tool, arguments: args }),
  });
  const body = await res.json();
  if (!res.ok || !body.callId) throw new Error(`submit ${tool}: ${res.status} ${JSON.stringify(body)}`);
  step(`submitted ${tool}: ${body.callId} (${body.state})`);
  return body.callId;
}

// open loads a page and marks it: the mark is gone if the page reloads.
async function open(page, url) {
  await page.goto(url);
  await page.evaluate(() => { window.__sameLoad = true; });
}

async function sameLoad(page) {
  check(await page.evaluate(() => window.__sameLoad === true), 'the page was updated in place, not reloaded');
}

await run('regions', async ({ page, baseURL }) => {
  await signIn(page, baseURL, env('KEY'));

  step('approvals: a call parked after the page loaded appears');
  await open(page, `${baseURL}/ui/approvals`);
  const id = await submit('wipe', { path: '/srv/live' });
  await page.locator(`[data-testid=approval][data-approval-id="${id}"]`).waitFor({ timeout: 20_000 });
  await sameLoad(page);

  step('dead letters: a new dead letter appears');
  await open(page, `${baseURL}/ui/dlq`);
  const before = Number(await page.getByTestId('dlq-total').innerText());
  const dead = await submit('flaky', { n: 7, token: 'live-secret-value' });
  await page.locator(`tbody#live-dlq-rows a[href="/ui/calls/${dead}"]`).waitFor({ timeout: 20_000 });
  await page.waitForFunction((n) => Number(document.querySelector('[data-testid=dlq-total]').textContent) > n, before);
  await sameLoad(page);

  step('pools: a pool\'s counts follow its calls');
  await open(page, `${baseURL}/ui/pools`);
  const text = () => page.locator('[data-testid=pool] [data-testid=workers] tbody').first().innerText();
  const was = await text();
  for (let i = 0; i < 5; i++) await submit('echo', { text: `pool ${i}` });
  await page.waitForFunction((w) => document.querySelector('[data-testid=pool] [data-testid=workers] tbody').innerText !== w, was, { timeout: 20_000 });
  await sameLoad(page);

  step('paused, the page stays as it is');
  await page.getByTestId('live-toggle').click();
  check((await page.getByTestId('live-toggle').getAttribute('aria-pressed')) === 'true', 'the control says paused');
  await page.evaluate(() => {
    window.__changes = 0;
    new MutationObserver((ms) => { window.__changes += ms.length; })
      .observe(document.getElementById('live-pools'), { childList: true, subtree: true, characterData: true });
  });
  for (let i = 0; i < 5; i++) await submit('echo', { text: `paused ${i}` });
  await page.waitForTimeout(6000); // more than the pools page's refresh (5 s)
  check((await page.evaluate(() => window.__changes)) === 0, 'nothing changed in 6 s of pause');
  await page.getByTestId('live-toggle').click();
  await page.waitForFunction(() => window.__changes > 0, null, { timeout: 20_000 });
  check(true, 'resumed, the pools updated again');
  await sameLoad(page);
});
