// The dashboard's bulk actions in a browser (TestBrowserBulkActions in
// internal/dashboard/browser_bulk_test.go starts the dispatcher, worker
// and fixtures): a bulk cancel of the held calls after the dry run's
// exact count and list, then a purge of the dead letters likewise; each
// dry run and result page has no serious or critical axe-core violation.
//
// Reads BASE_URL, ADMIN_KEY, READER_KEY, HELD (the held calls' ids,
// comma-separated) and, when set, LETTERS (the dead letters' sequences,
// comma-separated).

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { run, signIn, shot, check, step, env } from './lib.mjs';

const same = (a, b) => JSON.stringify([...a].sort()) === JSON.stringify([...b].sort());

// accessible checks the page with axe-core (as a11y.mjs does): no
// violation of impact serious or critical.
const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
async function accessible(page, what) {
  await page.addScriptTag({ content: axeSource });
  const bad = await page.evaluate(async () => {
    const r = await window.axe.run(document, { resultTypes: ['violations'] });
    return r.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(' ')).slice(0, 3)}`);
  });
  check(bad.length === 0, `${what}: no serious or critical accessibility violation (${bad.join('; ') || 'none'})`);
}

await run('bulk', async ({ baseURL, newPage }) => {
  // axe is added as an inline script, which the pages' CSP refuses.
  const page = await newPage({ bypassCSP: true });
  await signIn(page, baseURL, env('ADMIN_KEY'));
  const held = env('HELD').split(',');

  step('bulk-cancel the held calls after the dry run names them');
  await page.goto(`${baseURL}/ui/calls?tool=hold`);
  await Promise.all([page.waitForURL(/\/ui\/calls\/cancel$/), page.click('[data-testid=bulk-cancel]')]);
  check((await page.locator('[data-testid=count]').innerText()).trim() === String(held.length), `the dry run names exactly ${held.length}`);
  const listed = await page.locator('[data-testid=bulk-calls] tbody tr').evaluateAll((rows) => rows.map((r) => r.dataset.callId));
  check(same(listed, held), `the dry run lists the held calls (${listed})`);
  await shot(page, 'calls-cancel-confirm');
  await accessible(page, 'the bulk cancel dry run');
  await Promise.all([page.waitForLoadState('load'), page.click('[data-testid=confirm]')]);
  await page.locator('[data-testid=bulk-result]').waitFor();
  check((await page.locator('[data-testid=answered-count]').innerText()).trim() === String(held.length), 'every listed call answered');
  const outcomes = await page.locator('[data-testid=cancel-outcome]').allInnerTexts();
  check(outcomes.length === held.length && outcomes.every((o) => o.trim() === 'requested'), `each cancel requested (${outcomes})`);
  await shot(page, 'calls-cancel-result');
  await accessible(page, 'the bulk cancel result');

  if (process.env.LETTERS) {
    const letters = env('LETTERS').split(',');
    step('purge the dead letters after the dry run names them');
    await page.goto(`${baseURL}/ui/dlq?tool=flaky`);
    await Promise.all([page.waitForURL(/\/ui\/dlq\/purge$/), page.click('[data-testid=bulk-purge]')]);
    check((await page.locator('[data-testid=count]').innerText()).trim() === String(letters.length), `the dry run names exactly ${letters.length}`);
    const seqs = await page.locator('[data-testid=bulk-letters] tbody tr').evaluateAll((rows) => rows.map((r) => r.dataset.seq));
    check(same(seqs, letters), `the dry run lists the letters (${seqs})`);
    await shot(page, 'dlq-purge-confirm');
    await accessible(page, 'the purge dry run');
    await Promise.all([page.waitForLoadState('load'), page.click('[data-testid=confirm]')]);
    await page.locator('[data-testid=bulk-result]').waitFor();
    check((await page.locator('[data-testid=purged-count]').innerText()).trim() === String(letters.length), 'every listed letter purged');
    await accessible(page, 'the purge result');
    await page.goto(`${baseURL}/ui/dlq?tool=flaky`);
    check((await page.locator('[data-testid=dlq-total]').innerText()).trim() === '0', 'no dead letter of flaky is left');
  }

  step('a read-only key is offered neither');
  const reader = await newPage();
  await signIn(reader, baseURL, env('READER_KEY'));
  await reader.goto(`${baseURL}/ui/calls?tool=hold`);
  check(await reader.locator('[data-testid=bulk-cancel]').count() === 0, 'no bulk cancel for a read-only key');
  await reader.goto(`${baseURL}/ui/dlq`);
  if (await reader.locator('[data-testid=bulk-purge]').count() > 0) {
    check(await reader.locator('[data-testid=bulk-purge]').isDisabled(), 'purge is disabled for a read-only key');
  }
}, { allowPageErrors: false });
