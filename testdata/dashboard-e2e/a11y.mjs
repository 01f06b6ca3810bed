// The dashboard's accessibility check (TestBrowserAccessibility): every
// page the test's fixtures reach, in light and in dark mode, is checked
// with axe-core (the version pinned in package.json); a violation of
// impact "serious" or "critical" fails the scenario, and every rule found
// is printed with its impact and the first elements it names.
//
// axe.min.js is added to each page as an inline script, which the
// dashboard's Content-Security-Policy refuses: the pages of this scenario
// (only) are opened with playwright's bypassCSP.
//
// Environment: ADMIN_KEY (a key that reaches every page: the test gives the installation
// key) and PAGES (the
// paths to check, comma-separated, each under /ui/).
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { run, signIn, check, step } from './lib.mjs';

const require = createRequire(import.meta.url);
const axeSource = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
const failing = new Set(['serious', 'critical']);

// audit runs axe on the page as it is and returns its violations.
async function audit(page) {
  await page.addScriptTag({ content: axeSource });
  return page.evaluate(async () => {
    const r = await window.axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      nodes: v.nodes.map((n) => n.target.join(' ')),
    }));
  });
}

await run('a11y', async ({ baseURL, env, newPage }) => {
  const pages = env('PAGES').split(',');
  const bad = [];
  for (const scheme of ['light', 'dark']) {
    const page = await newPage({ bypassCSP: true, colorScheme: scheme });
    step(`${scheme}: the sign-in page`);
    await page.goto(`${baseURL}/ui/signin`);
    const found = [['signin', await audit(page)]];
    await signIn(page, baseURL, env('ADMIN_KEY'));
    for (const path of pages) {
      const res = await page.goto(`${baseURL}/ui/${path}`);
      check(res !== null && res.ok(), `${scheme}: GET /ui/${path} answered ${res?.status()}`);
      found.push([path, await audit(page)]);
    }
    for (const [path, violations] of found) {
      for (const v of violations) {
        step(`${scheme} /ui/${path}: ${v.impact} ${v.id} (${v.help}): ${v.nodes.length} element(s): ${v.nodes.slice(0, 3).join(' | ')}`);
        if (failing.has(v.impact)) bad.push(`${scheme} /ui/${path}: ${v.id}`);
      }
    }
    await page.context().close();
  }
  check(bad.length === 0, `no serious or critical violation (found: ${bad.join(', ') || 'none'})`);
});
