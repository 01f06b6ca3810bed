// The calls page under load (TestBrowserLiveCallsUnderLoad): while the
// test makes calls as fast as the machine manages, one tab on the calls
// page records its main thread's long tasks (PerformanceObserver
// 'longtask') for LOAD_MS and fails if one lasted BOUND_MS or more; it
// also counts the live events and bytes the tab received. Then the pause
// control stops the updates (no change to the rows for PAUSE_MS) and
// resume catches up (the rows are read afresh and updates flow again);
// after a quick pause/resume/pause/resume, the first resume's page read,
// answered last, changes no row.
//
// Environment: BASE_URL, READER_KEY, LOAD_MS (default 10000), BOUND_MS
// (default 250; 0 = the stall is measured and logged, not checked),
// PAUSE_MS (default 2000).
import { run, signIn, check, step, env } from './lib.mjs';

await run('live', async ({ page, baseURL }) => {
  const loadMs = Number(env('LOAD_MS', '10000'));
  const boundMs = Number(env('BOUND_MS', '250'));
  const pauseMs = Number(env('PAUSE_MS', '2000'));

  // Before any page script: long tasks, and what the live stream brings.
  await page.addInitScript(() => {
    window.__long = [];
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) window.__long.push({ start: e.startTime, duration: e.duration });
    }).observe({ type: 'longtask', buffered: true });
    window.__sse = { events: 0, bytes: 0, rows: 0 };
    const ES = window.EventSource;
    window.EventSource = function (url, opts) {
      const src = new ES(url, opts);
      for (const type of ['calls', 'call']) {
        src.addEventListener(type, (ev) => {
          window.__sse.events++;
          window.__sse.bytes += ev.data.length;
          window.__sse.rows += ev.data.split('\n').length;
        });
      }
      return src;
    };
    window.EventSource.prototype = ES.prototype;
  });

  await signIn(page, baseURL, env('READER_KEY'));
  await page.goto(`${baseURL}/ui/calls`);
  const first = () => page.locator('tbody#rows tr').first().getAttribute('data-call-id');
  const matched = () => page.getByTestId('matched').getAttribute('data-matched').then(Number);
  const matchedBefore = await matched();
  const was = await first();
  step('wait for live rows');
  await page.waitForFunction((id) => {
    const r = document.querySelector('tbody#rows tr');
    return r && r.getAttribute('data-call-id') !== id;
  }, was, { timeout: 20_000 });

  step(`record long tasks for ${loadMs} ms under load`);
  await page.evaluate(() => {
    window.__long = [];
    window.__sse = { events: 0, bytes: 0, rows: 0 };
    window.__t0 = performance.now();
    window.__changes = 0;
    new MutationObserver((ms) => { window.__changes += ms.length; })
      .observe(document.querySelector('tbody#rows'), { childList: true });
  });
  await page.waitForTimeout(loadMs);
  const m = await page.evaluate(() => ({
    long: window.__long, sse: window.__sse, secs: (performance.now() - window.__t0) / 1000,
    rows: document.querySelectorAll('tbody#rows tr').length, changes: window.__changes,
  }));
  const worst = m.long.reduce((a, e) => Math.max(a, e.duration), 0);
  step(`MEASURED: ${m.long.length} long task(s) over 50 ms, the longest ${worst.toFixed(0)} ms; ` +
    `${(m.sse.events / m.secs).toFixed(1)} live events/s, ${(m.sse.rows / m.secs).toFixed(0)} rows/s, ` +
    `${(m.sse.bytes / m.secs / 1024).toFixed(1)} KB/s; ${m.changes} DOM batches; ${m.rows} rows kept`);
  check(m.sse.events > 0 && m.changes > 0, 'the rows updated live under load');
  check(m.sse.events / m.secs <= 5, 'at most 4 live events a second (one every 250 ms)');
  check(m.rows <= 50, 'at most the page limit of rows is kept');
  const matchedAfter = await matched();
  check(matchedAfter > matchedBefore, `the matching count grew with the live rows (${matchedBefore} → ${matchedAfter})`);
  if (boundMs > 0) { // 0: measured only (a stall is the host's as much as the page's)
    check(worst < boundMs, `no main-thread stall of ${boundMs} ms or more (longest ${worst.toFixed(0)} ms)`);
  }

  step('pause');
  await page.getByTestId('live-toggle').click();
  check((await page.getByTestId('live-toggle').getAttribute('aria-pressed')) === 'true', 'the control says paused');
  check((await page.getByTestId('live').innerText()) === 'paused', 'the page says paused');
  const paused = await first();
  await page.evaluate(() => { window.__changes = 0; });
  await page.waitForTimeout(pauseMs);
  check((await page.evaluate(() => window.__changes)) === 0, `no row changed in ${pauseMs} ms of pause`);
  check((await first()) === paused, 'the newest row is the one shown at the pause');

  step('resume');
  await page.getByTestId('live-toggle').click();
  check((await page.getByTestId('live').innerText()) === 'live', 'the page says live again');
  await page.waitForFunction((id) => {
    const r = document.querySelector('tbody#rows tr');
    return r && r.getAttribute('data-call-id') > id; // ULIDs: later is greater
  }, paused, { timeout: 20_000 });
  check(true, 'resume caught up: newer calls than at the pause are shown');
  const after = await page.locator('tbody#rows tr').count();
  check(after === 50, `the page is full again (${after} rows)`);

  // Pause, resume, pause, resume quickly, the first resume's page read
  // answered last (and stale): it changes nothing.
  step('a quick pause/resume/pause/resume: the overtaken read is ignored');
  await page.evaluate(() => {
    window.__texts = 0; // page reads whose text was read (app.js parses and applies it in the same microtasks)
    const text = Response.prototype.text;
    Response.prototype.text = function () { return text.call(this).then((t) => { window.__texts++; return t; }); };
  });
  let release;
  const held = new Promise((r) => { release = r; });
  let reads = 0;
  const isCalls = (url) => url.pathname === '/ui/calls';
  const hold = async (route) => {
    if (route.request().resourceType() !== 'fetch') return route.continue();
    if (++reads > 1) return route.continue();
    await held;
    return route.fulfill({ status: 200, contentType: 'text/html',
      body: '<table><tbody id="rows"><tr data-call-id="STALE"><td><a href="#">stale</a></td></tr></tbody></table>' });
  };
  await page.route(isCalls, hold);
  const toggle = page.getByTestId('live-toggle');
  for (let i = 0; i < 4; i++) await toggle.click();
  check((await page.getByTestId('live').innerText()) === 'live', 'live after two pauses and two resumes');
  await page.waitForFunction(() => window.__texts >= 1, null, { timeout: 20_000 }); // the second resume's read
  release();
  await page.waitForFunction(() => window.__texts >= 2, null, { timeout: 20_000 }); // the stale one
  check((await page.locator('tbody#rows tr[data-call-id="STALE"]').count()) === 0, 'the stale read changed no row');
  await page.unroute(isCalls, hold);
  const newest = await first();
  await page.waitForFunction((id) => {
    const r = document.querySelector('tbody#rows tr');
    return r && r.getAttribute('data-call-id') > id;
  }, newest, { timeout: 20_000 });
  check(true, 'live updates flow after it');
});
