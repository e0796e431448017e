// The dashboard in a real browser (Debian's chromium, driven by
// playwright-core; no browser is downloaded), against the real daemon that
// tests/integration/test_ui.sh started.  Prints "ok - ..." / "not ok - ..."
// lines like the shell tests; the shell counts them.
//
// Environment: URL, TOKEN (a member's), VIEWER (a viewer's), RUN_LIVE (a run
// that is running: command output, then a checkpoint), RUN_REJECT and
// RUN_VIEW (runs at their checkpoint), RUN_BUDGET (a run stopped on its
// budget), ADMIN (a project admin's token), OLD_DAY (the day RUN_REJECT was
// made, ten days ago) and TODAY, KILL_HTTPD and REVOKE (commands: kill
// httpd, which the supervisor restarts; revoke TOKEN), SHOTS (the directory
// for screenshots).
import { chromium } from 'playwright-core';
import { execSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';

const env = process.env;
const URL = env.URL;
const SHOTS = env.SHOTS;
mkdirSync(SHOTS, { recursive: true });
let failed = 0;
const ok = (cond, what) => {
  console.log((cond ? 'ok - ' : 'not ok - ') + what);
  if (!cond) failed++;
};

const launchArgs = ['--headless=new', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];
// Chromium's own sandbox cannot run as root: only this test, as root, goes without it.
if (process.getuid() === 0) launchArgs.push('--no-sandbox');
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: launchArgs });

// Every dialog, console error, uncaught error and CSP violation of a page;
// `expect` marks a window in which the test provokes refusals on purpose
// (the browser logs each refused request as a console error).
function watch(page, name) {
  const w = { dialogs: [], errors: [], expected: [], expect: false };
  page.on('dialog', (d) => { w.dialogs.push(d.message()); d.dismiss().catch(() => {}); });
  page.on('console', (m) => {
    if (m.type() !== 'error' && m.type() !== 'warning') return;
    const t = m.text();
    if (m.type() === 'warning' && !/Content.Security.Policy|Refused/i.test(t)) return;
    (w.expect && /Failed to load resource|net::ERR|EventSource/.test(t) ? w.expected : w.errors).push(t);
  });
  page.on('pageerror', (e) => w.errors.push('pageerror: ' + e.message));
  w.name = name;
  return w;
}

const shot = (page, name) => page.screenshot({ path: `${SHOTS}/${name}.png`, fullPage: true });

async function login(page, token) {
  await page.goto(URL + '/');
  await page.waitForSelector('#token');
  await page.fill('#token', token);
  await page.click('form.login button[type=submit]');
  await page.waitForSelector('#logout');
}

// The seqs of the events on the page, in document order.
const pageSeqs = (page) => page.$$eval('#events li', (lis) => lis.map((li) => Number(li.dataset.seq)));
const apiEvents = (page, run) => page.evaluate(async (r) => {
  const res = await fetch(`/v1/runs/${r}/events?limit=1000`);
  return (await res.json()).events.map((e) => [e.seq, e.type]);
}, run);
const runStatus = (page, run) => page.evaluate(async (r) => (await (await fetch(`/v1/runs/${r}`)).json()).status, run);

try {
  // ---- sign in ----------------------------------------------------------------------
  const ctx = await browser.newContext({ viewport: { width: 1200, height: 900 } });
  const page = await ctx.newPage();
  const w = watch(page, 'member');
  await page.goto(URL + '/');
  await page.waitForSelector('#token');
  await shot(page, '01-login');
  const loginResp = page.waitForResponse((r) => r.url().endsWith('/v1/session') && r.request().method() === 'POST');
  await page.fill('#token', env.TOKEN);
  await page.click('form.login button[type=submit]');
  const lr = await loginResp;
  ok(lr.status() === 200 && !lr.url().includes('agr_'), 'sign in with a token: POST /v1/session, 200, the token in no URL');
  await page.waitForSelector('#runs tr[data-run]');
  ok(!page.url().includes('agr_'), 'the token is not in the page\'s URL');
  ok(await page.$eval('#token', () => false).catch(() => true), 'the login form is gone');
  ok(await page.evaluate(() => document.cookie) === '', 'document.cookie is empty: the session cookie is HttpOnly');
  const cookies = await ctx.cookies();
  const sc = cookies.find((c) => c.name === 'agrippa_session');
  ok(sc && sc.httpOnly && sc.sameSite === 'Strict' && sc.path === '/', 'the browser holds the cookie HttpOnly, SameSite=Strict, Path=/');
  ok(await page.evaluate(() => Object.keys(localStorage).length + Object.keys(sessionStorage).length) === 0,
    'nothing in localStorage or sessionStorage');
  await shot(page, '02-runs');
  ok(await page.$$eval('#runs tr[data-run]', (r) => r.length) >= 3, 'the project\'s runs are listed');

  // filter by status
  await page.selectOption('#f-status', 'waiting_approval');
  await page.click('.filters button[type=submit]');
  await page.waitForFunction(() => [...document.querySelectorAll('#runs tr[data-run] .status')].every((s) => s.textContent === 'waiting_approval'));
  ok(true, 'the runs filter by status');

  // filter by day (the API lists newest first; the page filters by the day each run was made)
  const soon = (fn, arg) => page.waitForFunction(fn, arg, { timeout: 10000 }).then(() => true, () => false);
  const listed = () => page.$$eval('#runs tr[data-run]', (r) => r.map((x) => x.dataset.run));
  const byDay = async (since, until) => {
    await page.selectOption('#f-status', '');
    await page.fill('#f-since', since);
    await page.fill('#f-until', until);
    await page.click('.filters button[type=submit]');
  };
  await byDay(env.TODAY, '');
  ok(await soon(([live, old]) => {
    const ids = [...document.querySelectorAll('#runs tr[data-run]')].map((x) => x.dataset.run);
    return ids.includes(live) && !ids.includes(old);
  }, [env.RUN_LIVE, env.RUN_REJECT]), `from today: today's runs, not the one of ${env.OLD_DAY} (${await listed()})`);
  await byDay('', env.OLD_DAY);
  ok(await soon((old) => {
    const ids = [...document.querySelectorAll('#runs tr[data-run]')].map((x) => x.dataset.run);
    return ids.length === 1 && ids[0] === old;
  }, env.RUN_REJECT), `to ${env.OLD_DAY}: only the run made that day (${await listed()})`);
  await shot(page, '02b-runs-by-day');
  ok(page.url().includes(`until=${env.OLD_DAY}`) && !page.url().includes('since='),
    'the filter is in the page\'s address (' + page.url().split('#')[1] + ')');
  await page.reload();
  ok(await soon((old) => {
    const ids = [...document.querySelectorAll('#runs tr[data-run]')].map((x) => x.dataset.run);
    return ids.length === 1 && ids[0] === old && document.querySelector('#f-until').value !== '';
  }, env.RUN_REJECT), 'and a reload shows the same filtered list');
  await byDay(env.OLD_DAY, env.TODAY);
  ok(await soon((n) => document.querySelectorAll('#runs tr[data-run]').length === n, 4),
    `from ${env.OLD_DAY} to today: all four runs (${(await listed()).length})`);
  await byDay(env.TODAY, env.OLD_DAY);
  ok(await soon(() => /first day is after the last/.test(document.querySelector('main').textContent)),
    'a first day after the last is refused with a message');
  ok((await listed()).length === 4, '... and the list stays as it was');

  // ---- a run while it runs: earlier events, then new ones, each once, in order ---------
  await page.goto(`${URL}/#/runs/${env.RUN_LIVE}`);
  await page.waitForSelector('#events li');
  const statusAtOpen = await runStatus(page, env.RUN_LIVE);
  await page.waitForFunction(() => document.querySelectorAll('#events li[data-type="step.output"]').length >= 2);
  const firstSeen = await pageSeqs(page);
  ok(statusAtOpen === 'running' || statusAtOpen === 'queued', `the run was still going when the page opened (${statusAtOpen})`);
  ok(firstSeen[0] === 1, 'the stream replayed from the first event');
  await shot(page, '03-run-live');

  // the server drops the stream: httpd is killed and restarted mid-run
  w.expect = true;
  execSync(env.KILL_HTTPD);
  await page.waitForSelector('#approve', { timeout: 120000 });
  w.expect = false;
  const seqs = await pageSeqs(page);
  const api = await apiEvents(page, env.RUN_LIVE);
  const apiNow = api.filter(([s]) => s <= seqs[seqs.length - 1]);
  ok(seqs.length > firstSeen.length, `new events arrived after the page opened (${firstSeen.length} then ${seqs.length})`);
  ok(seqs.every((s, i) => s === i + 1), 'after the drop: every event once, in order, no gap (' + seqs.length + ')');
  ok(JSON.stringify(apiNow.map(([s]) => s)) === JSON.stringify(seqs), 'the page shows exactly the events the API has');
  const types = await page.$$eval('#events li', (lis) => lis.map((li) => li.dataset.type));
  ok(JSON.stringify(types) === JSON.stringify(apiNow.map(([, t]) => t)), 'each with its type');
  ok((await page.textContent('#events')).includes('line 3'), 'command output is shown');

  // ---- hostile text is text --------------------------------------------------------------
  const text = await page.textContent('main');
  ok(text.includes('<script>window.__xss=1') && text.includes('<img src=x onerror='),
    'a command\'s output holding <script> and <img onerror> shows as text');
  ok(text.includes('<b>bold</b><img src=x onerror=alert(4)>'), 'a run param holding markup shows as text');
  ok(text.includes('<img src=x onerror=alert(3)>'), 'the checkpoint\'s message holding markup shows as text');
  ok(await page.textContent('#approval-message') === 'Ship it? <img src=x onerror=alert(3)>', '... in the approval panel too');
  ok(await page.$$eval('main script, main img, main b', (e) => e.length) === 0, 'no element was made from any of it');
  ok(await page.evaluate(() => window.__xss === undefined), 'no injected script ran');

  // ---- approve from the page -------------------------------------------------------------------
  await page.fill('#approval-comment', 'looks good <img src=x onerror=alert(6)>');
  await page.click('#approve');
  await page.waitForFunction(() => document.querySelector('#run-status')?.textContent === 'succeeded', null, { timeout: 60000 });
  await page.waitForSelector('pre.diff .dl.add');
  ok(true, 'approved from the page: the run finished, succeeded');
  ok(await page.textContent('#live') === 'finished', 'the stream ended with the terminal event');
  const diffText = await page.textContent('pre.diff');
  ok(diffText.includes('+<img src=x onerror=alert(5)>') && await page.$$eval('pre.diff img', (e) => e.length) === 0,
    'the patch shows as a coloured diff, its markup as text');
  ok(await page.$$eval('pre.diff .dl.add', (e) => e.length) >= 1 && await page.$$eval('pre.diff .dl.hunk', (e) => e.length) >= 1,
    'added lines and hunks are marked');
  const dl = await page.$eval('#artifacts a[download]', (a) => a.getAttribute('href'));
  const got = await page.evaluate(async (h) => { const r = await fetch(h); return [r.status, r.headers.get('content-disposition')]; }, dl);
  ok(got[0] === 200 && /attachment/.test(got[1]), 'the artifact downloads (' + got[1] + ')');
  const seqsEnd = await pageSeqs(page);
  const apiEnd = await apiEvents(page, env.RUN_LIVE);
  ok(JSON.stringify(seqsEnd) === JSON.stringify(apiEnd.map(([s]) => s)), 'to the end: every event once, in order (' + seqsEnd.length + ')');
  await shot(page, '04-run-finished');

  // ---- reject one ------------------------------------------------------------------------------------
  await page.goto(`${URL}/#/runs/${env.RUN_REJECT}`);
  await page.waitForSelector('#reject');
  await page.click('#reject');
  await page.waitForFunction(() => document.querySelector('#run-status')?.textContent === 'failed', null, { timeout: 60000 });
  ok(true, 'rejected from the page: the run failed');

  // ---- a run stopped on its budget: a member may not raise it, an admin does ---------------
  await page.goto(`${URL}/#/runs/${env.RUN_BUDGET}`);
  await page.waitForSelector('#budget-admin-only');
  ok(await page.$('#raise') === null && await page.$('#budget-usd') === null,
    'a run stopped on its budget: a member has no form to raise it, and is told an admin may');
  await shot(page, '04b-budget-member');
  const actx = await browser.newContext({ viewport: { width: 1200, height: 900 } });
  const apage = await actx.newPage();
  const aw = watch(apage, 'admin');
  await login(apage, env.ADMIN);
  await apage.goto(`${URL}/#/runs/${env.RUN_BUDGET}`);
  await apage.waitForSelector('#raise');
  ok(/budget at think/.test(await apage.textContent('#approval')), 'an admin sees the budget approval of the agent step');
  ok(/Spent \$0\.00 of \$0\.00 \(the run's budget\)/.test(await apage.textContent('#budget-spent')),
    'with what the run spent of its budget (' + await apage.textContent('#budget-spent') + ')');
  await apage.fill('#budget-usd', '-1');
  await apage.click('#raise');
  await apage.waitForTimeout(500);
  ok(await runStatus(apage, env.RUN_BUDGET) === 'waiting_approval' && await apage.$('#raise') !== null,
    'a negative budget is not sent: the run still waits');
  await apage.fill('#budget-usd', '0.30');
  await shot(apage, '04c-budget-raise');
  await apage.click('#raise');
  await apage.waitForFunction(() => document.querySelector('#run-status')?.textContent === 'succeeded', null, { timeout: 60000 });
  ok(true, 'raised from the page: the run resumed and finished, succeeded');
  ok((await apage.textContent('#spent')).includes('of $0.30'), 'the spend meter shows the new budget (' +
    await apage.textContent('#spent') + ')');
  ok(await apage.$('#approval') === null, 'no approval waits any more');
  const bev = await apage.$$eval('#events li', (l) => l.map((x) => x.dataset.type));
  ok(bev.includes('budget.changed') && bev.indexOf('budget.changed') < bev.indexOf('run.resumed'),
    'the page shows budget.changed, then run.resumed');
  await shot(apage, '04d-budget-raised');

  // ---- the approvals inbox ------------------------------------------------------------------------------
  await page.click('#nav-approvals');
  await page.waitForSelector('#inbox li');
  const inbox = await page.$$eval('#inbox a', (as) => as.map((a) => a.getAttribute('href')));
  ok(inbox.length === 1 && inbox[0] === '#/runs/' + env.RUN_VIEW, 'the inbox lists the one pending approval');
  ok((await page.textContent('#inbox')).includes('Ship it? <img src=x onerror=alert(3)>') &&
    await page.$$eval('#inbox img', (e) => e.length) === 0, 'with its message, as text');
  await shot(page, '05-approvals');

  // ---- usage ----------------------------------------------------------------------------
  await page.goto(`${URL}/#/projects/${env.P1}/runs`);
  await page.waitForSelector('#usage-link');
  await page.click('#usage-link');
  await page.waitForSelector('#spend-chart', { state: 'attached' });
  const bars = await page.$$eval('#spend-chart rect.bar', (r) => r.length);
  ok(bars >= 28 && bars <= 31, `the usage view draws a bar per day of the month (${bars})`);
  ok((await page.textContent('#usage-total')).includes('spent'), 'with the month\'s spend');
  await shot(page, '05b-usage');

  // ---- templates ----------------------------------------------------------------------------
  await page.click('#nav-templates');
  await page.waitForSelector('#templates a');
  await page.click('#templates a');
  await page.waitForSelector('#compiled');
  ok((await page.textContent('#compiled')).includes('"phases"'), 'a template with its compiled form');
  await shot(page, '05c-template');

  // ---- CSRF and Origin: the cookie alone changes nothing ---------------------------------------------
  w.expect = true;
  const csrfCodes = await page.evaluate(async (r) => {
    const post = (h) => fetch(`/v1/runs/${r}/cancel`, { method: 'POST', headers: h }).then((x) => x.status);
    return [await post({}), await post({ 'X-CSRF-Token': 'A'.repeat(43) })];
  }, env.RUN_VIEW);
  ok(csrfCodes[0] === 403 && csrfCodes[1] === 403, `with the cookie, no CSRF token and a wrong one: 403 (${csrfCodes})`);
  const csrf = await page.evaluate(async () => (await (await fetch('/v1/session')).json()).csrf_token);
  const evil = await ctx.request.post(`${URL}/v1/runs/${env.RUN_VIEW}/cancel`,
    { headers: { Origin: 'http://evil.example', 'X-CSRF-Token': csrf } });
  ok(evil.status() === 403, `with the cookie and the right token, from another Origin: 403 (${evil.status()})`);
  w.expect = false;
  ok(await runStatus(page, env.RUN_VIEW) === 'waiting_approval', 'and the run was not cancelled');

  // ---- a viewer ----------------------------------------------------------------------------------------------
  const vctx = await browser.newContext({ viewport: { width: 1200, height: 900 } });
  const vpage = await vctx.newPage();
  const vw = watch(vpage, 'viewer');
  await login(vpage, env.VIEWER);
  await vpage.goto(`${URL}/#/runs/${env.RUN_VIEW}`);
  await vpage.waitForSelector('#approval');
  ok(await vpage.$('#approve') === null && await vpage.$('#cancel') === null, 'a viewer sees no approve or cancel button');
  vw.expect = true;
  const vcode = await vpage.evaluate(async (r) => {
    const csrfv = (await (await fetch('/v1/session')).json()).csrf_token;
    const ap = (await (await fetch(`/v1/runs/${r}/approvals`)).json()).approvals[0];
    return (await fetch(`/v1/approvals/${ap.id}/decide`, { method: 'POST',
      headers: { 'X-CSRF-Token': csrfv, 'Content-Type': 'application/json' },
      body: JSON.stringify({ decision: 'approved' }) })).status;
  }, env.RUN_VIEW);
  vw.expect = false;
  ok(vcode === 403, `and the API refuses the viewer's decision (${vcode})`);
  await vpage.waitForSelector('#events li[data-type="future.kind"]');
  ok(true, 'an event of a type the page does not know is shown too');
  const vtext = await vpage.textContent('#events');
  ok(vtext.includes('The model says <script>window.__xss=2</script>') && vtext.includes('<img src=x onerror=alert(7)>'),
    'agent messages and tool calls holding markup show as text');
  ok(await vpage.$$eval('#events details.long', (d) => d.length) >= 2 &&
    await vpage.$$eval('#events details.long[open]', (d) => d.length) === 0, 'long ones are collapsed');
  ok(await vpage.$$eval('#events script, #events img', (e) => e.length) === 0 &&
    await vpage.evaluate(() => window.__xss === undefined), 'and none of it runs');
  await shot(vpage, '06-viewer-run');

  // ---- an expired session: "sign in again" ----------------------------------------------------
  vw.expect = true;
  execSync(env.EXPIRE);
  // the next request the page makes is refused (it may make one itself first)
  await vpage.click('#nav-approvals', { timeout: 3000 }).catch(() => {});
  await vpage.waitForSelector('#signin-again', { timeout: 15000 });
  vw.expect = false;
  ok(true, 'an expired session: the page says sign in again');

  // ---- the token revoked: "sign in again" -------------------------------------------------------------------
  w.expect = true;
  execSync(env.REVOKE);
  await page.goto(`${URL}/#/projects`);
  await page.click('#nav-approvals', { timeout: 3000 }).catch(() => {});
  await page.waitForSelector('#signin-again', { timeout: 15000 });
  w.expect = false;
  ok(/sign in again/i.test(await page.textContent('#signin-again')), 'a revoked token: the page says sign in again');
  await shot(page, '07-signed-out');

  for (const x of [w, vw, aw]) {
    ok(x.dialogs.length === 0, `${x.name}: no dialog opened (${x.dialogs.join(' | ')})`);
    ok(x.errors.length === 0, `${x.name}: no console error, no CSP violation (${x.errors.join(' | ')})`);
  }
} catch (e) {
  ok(false, 'the browser test ran to its end: ' + (e && e.stack || e));
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);
