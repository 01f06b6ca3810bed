// A call the policy refused (TestBrowserRefusedCall): it is in the calls
// list with its outcome and reason, the outcome filter selects it, and its
// page shows the rule and the rule's reason.
//
// Environment: BASE_URL, READER_KEY, DENIED (the refused call's id),
// REASON (the rule's reason), RULE (the rule's id).
import { run, signIn, check, shot, step, env } from './lib.mjs';

await run('refused', async ({ page, baseURL }) => {
  const denied = env('DENIED');
  await signIn(page, baseURL, env('READER_KEY'));
  step('open the calls page');
  await page.goto(`${baseURL}/ui/calls`);
  const row = page.locator(`tr[data-call-id="${denied}"]`);
  await row.waitFor();
  check((await row.getByTestId('outcome').innerText()) === 'rejected', 'the refused call is listed as rejected');
  check((await row.getByTestId('reason').innerText()).includes(env('REASON')), 'its row shows the reason');
  await shot(page, 'calls-refused');

  step('filter by outcome rejected');
  await page.selectOption('select[name=outcome]', 'rejected');
  await Promise.all([page.waitForURL(/outcome=rejected/), page.click('form[data-testid=filters] button[type=submit]')]);
  const rows = page.locator('tbody#rows tr[data-call-id]');
  check((await rows.count()) >= 1, 'the filter lists refusals');
  for (const o of await rows.getByTestId('outcome').allInnerTexts()) check(o === 'rejected', `a listed outcome is ${o}`);

  step('open the refused call');
  await Promise.all([page.waitForURL(new RegExp(`/ui/calls/${denied}$`)), page.click(`a[href="/ui/calls/${denied}"]`)]);
  check(await page.getByTestId('refused').isVisible(), 'the page says the call was refused at admission');
  check((await page.getByTestId('rule').innerText()) === env('RULE'), 'the page names the rule');
  check((await page.getByTestId('policy-reason').innerText()).includes(env('REASON')), "the page shows the rule's reason");
  await shot(page, 'call-refused');
});
