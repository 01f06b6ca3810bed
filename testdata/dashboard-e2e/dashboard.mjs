// The dashboard's browser scenario (TestBrowserDashboard in
// internal/dashboard/browser_dashboard_test.go starts the dispatcher,
// worker and fixtures: two dead letters of flaky, two versions of report).
//
// Reads BASE_URL (the dashboard's server), API_URL (the dispatcher's API,
// where the scenario makes calls as an agent would), ADMIN_KEY,
// APPROVER_KEY and READER_KEY.

import { run, signIn, shot, check, step } from './lib.mjs';

const api = process.env.API_URL;

// submit makes a call through the API as the admin key's agent and
// returns its id.
async function submit(tool, args) {
  const res = await fetch(`${api}/toolwire.v1.DispatcherService/Submit`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${process.env.ADMIN_KEY}` },
    body: JSON.stringify({ tool, arguments: args }),
  });
  const body = await res.json();
  if (!res.ok || !body.callId) throw new Error(`submit ${tool}: ${res.status} ${JSON.stringify(body)}`);
  step(`submitted ${tool}: ${body.callId} (${body.state})`);
  return body.callId;
}

// outcome is the outcome a call's page shows.
async function outcome(page) {
  return (await page.locator('.facts [data-testid=outcome]').innerText()).trim();
}

// waitOutcome reloads a call's page until it shows want (the page also
// reloads itself when the call finishes), failing after 20 s.
async function waitOutcome(page, want) {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const got = await outcome(page);
    if (got === want) return;
    if (Date.now() > deadline) throw new Error(`the call's outcome stayed ${got}, want ${want}`);
    await page.waitForTimeout(250); // polling with a deadline
    await page.reload();
  }
}

// gotoCall opens a call's page once the calls index has the call: a call
// just submitted through the API is indexed a moment later (until then
// its page answers 404), failing after 20 s.
async function gotoCall(page, baseURL, id) {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const res = await page.goto(`${baseURL}/ui/calls/${id}`);
    if (res.status() !== 404) return;
    if (Date.now() > deadline) throw new Error(`call ${id} was never indexed`);
    await page.waitForTimeout(100); // polling with a deadline
  }
}

await run('dashboard', async ({ page, baseURL, env, newPage }) => {
  page.on('dialog', (d) => d.accept()); // the confirm steps of data-confirm forms

  step('the sign-in page');
  await page.goto(`${baseURL}/ui/signin`);
  await shot(page, 'signin');
  await signIn(page, baseURL, env('ADMIN_KEY'));
  check(page.url().endsWith('/ui/calls'), 'sign-in leads to the calls page');
  check(await page.locator('[data-testid=live]').isVisible(), 'the calls page is live');

  step('a call appears live');
  const live = await submit('echo', { text: 'made while you watched' });
  await page.locator(`tbody#rows tr[data-call-id="${live}"]`).waitFor();
  await page.locator(`tbody#rows tr[data-call-id="${live}"] [data-testid=outcome]:text("ok")`).waitFor();
  check(true, 'the new call is on the page, finished, without a reload');
  await shot(page, 'calls');

  step('filter by tool');
  await page.fill('form[data-testid=filters] input[name=tool]', 'flaky');
  await Promise.all([page.waitForURL(/tool=flaky/), page.click('form[data-testid=filters] button[type=submit]')]);
  const tools = await page.locator('tbody#rows tr td:nth-child(3)').allInnerTexts();
  check(tools.length === 2 && tools.every((t) => t === 'flaky'), `only flaky's two calls are listed (${tools})`);
  await shot(page, 'calls-filtered');

  step("open a call's timeline");
  await page.goto(`${baseURL}/ui/calls`);
  await Promise.all([page.waitForURL(new RegExp(`/ui/calls/${live}$`)), page.click(`a[href="/ui/calls/${live}"]`)]);
  const timeline = await page.locator('[data-testid=timeline]').innerText();
  check(timeline.includes('admitted') && timeline.includes('result'), 'the timeline has the admission and the result');
  check((await page.locator('[data-testid=result]').innerText()).includes('made while you watched'), 'the result is rendered');
  await shot(page, 'call');

  step('cancel a running call');
  const held = await submit('hold', {});
  await gotoCall(page, baseURL, held);
  await page.locator('[data-testid=running]').waitFor();
  await Promise.all([page.waitForURL(/done=requested/), page.click('button:text("Cancel call")')]);
  await waitOutcome(page, 'cancelled');
  check((await page.locator('[data-testid=timeline]').innerText()).includes('cancelled from the dashboard by acme/ops'),
    'the timeline names who cancelled');
  await shot(page, 'call-cancelled');

  step('approve a parked call and watch it finish');
  const parked = await submit('wipe', { path: '/tmp/scratch' });
  const approver = await newPage();
  approver.on('dialog', (d) => d.accept());
  await signIn(approver, baseURL, env('APPROVER_KEY'));
  await approver.goto(`${baseURL}/ui/approvals`);
  const card = approver.locator(`[data-approval-id="${parked}"]`);
  await card.waitFor();
  await shot(approver, 'approvals');
  await Promise.all([approver.waitForURL(/done=/), card.locator('[data-testid=approve]').click()]);
  await gotoCall(approver, baseURL, parked);
  await waitOutcome(approver, 'ok');
  check((await approver.locator('[data-testid=result]').innerText()).includes('wiped /tmp/scratch'), 'the approved call ran');
  await shot(approver, 'call-approved');

  step('bulk-retry two dead letters after the dry-run count');
  await page.goto(`${baseURL}/ui/dlq?tool=flaky`);
  check((await page.locator('[data-testid=dlq-total]').innerText()).trim() === '2', 'two dead letters of flaky');
  await shot(page, 'dlq');
  await Promise.all([page.waitForURL(/\/ui\/dlq\/retry$/), page.click('[data-testid=bulk-retry]')]);
  check((await page.locator('[data-testid=count]').innerText()).trim() === '2', 'the dry run names exactly two');
  await shot(page, 'dlq-confirm');
  await Promise.all([page.waitForLoadState('load'), page.click('[data-testid=confirm]')]);
  await page.locator('[data-testid=bulk-result]').waitFor();
  check((await page.locator('[data-testid=created-count]').innerText()).trim() === '2', 'two new calls created');
  const created = await page.locator('[data-testid=new-call]').allInnerTexts();
  check(created.length === 2, `the result lists the two new calls (${created})`);
  await shot(page, 'dlq-result');

  step('diff two versions of a tool');
  await page.goto(`${baseURL}/ui/tools`);
  await shot(page, 'tools');
  await page.goto(`${baseURL}/ui/tools/report`);
  const diff = page.locator('[data-testid=diff]');
  await diff.waitFor();
  check((await diff.locator('.add').count()) > 0 && (await diff.locator('.del').count()) > 0, 'the diff shows lines added and removed');
  check((await diff.innerText()).includes('year'), 'the new field is in the diff');
  await shot(page, 'tool-diff');

  step('pools and limits');
  // The pools serve every tenant: an installation key's page, not acme/ops's (a 403).
  const operator = await newPage();
  await signIn(operator, baseURL, env('INSTALL_KEY'));
  await operator.goto(`${baseURL}/ui/pools`);
  await operator.locator('[data-testid=pool][data-pool=native]').waitFor();
  check(await operator.locator('[data-testid=pause-pool]').count() > 0, 'the pool card offers Pause to an installation admin');
  await shot(operator, 'pools');
  await operator.close();
  await page.goto(`${baseURL}/ui/limits`);
  await shot(page, 'limits');

  step('an action without its CSRF token is refused');
  const status = await page.evaluate(async (id) => {
    const r = await fetch(`/ui/calls/${id}/cancel`, { method: 'POST', headers: { 'Content-Type': 'application/x-www-form-urlencoded' }, body: 'reason=x' });
    return r.status;
  }, held);
  check(status === 403, `a cancel without the token answers 403 (got ${status})`);

  step('a read-only key finds every action disabled, and refused');
  const reader = await newPage();
  await signIn(reader, baseURL, env('READER_KEY'));
  const running = await submit('hold', {});
  await gotoCall(reader, baseURL, running);
  const cancel = reader.locator('button:text("Cancel call")');
  check(await cancel.isDisabled(), 'cancel is disabled');
  await reader.goto(`${baseURL}/ui/dlq?tool=flaky`);
  check(await reader.locator('[data-testid=bulk-retry]').isDisabled(), 'bulk retry is disabled');
  await reader.goto(`${baseURL}/ui/calls/${running}`);
  // Enabled by hand, as a curious user might: the server still refuses.
  await reader.evaluate(() => document.querySelectorAll('button[disabled]').forEach((b) => b.removeAttribute('disabled')));
  reader.on('dialog', (d) => d.accept());
  await Promise.all([reader.waitForLoadState('load'), cancel.click()]);
  check((await reader.locator('[data-testid=error]').innerText()).includes('admin'), 'the server refuses, naming the scope');
  await shot(reader, 'read-only');
  // Let the held call end: its agent cancels it.
  const res = await fetch(`${api}/toolwire.v1.DispatcherService/Cancel`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${process.env.ADMIN_KEY}` },
    body: JSON.stringify({ callId: running, reason: 'scenario over' }),
  });
  check(res.ok, `the held call is cancelled (${res.status})`);
}, { allowPageErrors: false });
