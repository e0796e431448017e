// docs/openapi.yaml checked two ways (the packages are pinned in
// package-lock.json and installed by make deps):
//
//   node tests/browser/openapi.mjs validate docs/openapi.yaml
//     the standard validator (@seriousme/openapi-schema-validator, the
//     official OpenAPI JSON schemas) accepts the file as OpenAPI 3.1, every
//     $ref resolves, and every schema in it compiles as JSON Schema 2020-12
//     under ajv's strict mode (so a misspelt keyword is an error, not an
//     ignored annotation);
//
//   node tests/browser/openapi.mjs live docs/openapi.yaml
//     requests to a running daemon (tests/integration/test_openapi.sh starts
//     it and passes URL, tokens and ids in the environment), each answer
//     checked against the spec: its path matches one of the spec's path
//     templates, its status is one the operation declares, its media type is
//     one the response declares, and its body and declared headers validate
//     against their schemas; request bodies the daemon accepts validate
//     against the operation's requestBody schema, and those it refuses with
//     a 422 body error do not.  Every operation must have answered at least
//     one success.
//
// Prints "ok - ..." / "not ok - ..." lines; exits 1 when any failed.
import fs from 'node:fs';
import { Validator } from '@seriousme/openapi-schema-validator';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import YAML from 'yaml';

const [mode, file] = process.argv.slice(2);
if ((mode !== 'validate' && mode !== 'live') || !file) {
	console.error('usage: openapi.mjs validate|live FILE');
	process.exit(2);
}
let failed = 0;
const ok = (d) => console.log(`ok - ${d}`);
const notok = (d, detail) => {
	failed++;
	console.log(`not ok - ${d}`);
	if (detail) for (const l of String(detail).split('\n')) console.log(`#   ${l}`);
};
const check = (d, cond, detail) => (cond ? ok(d) : notok(d, detail));

const doc = YAML.parse(fs.readFileSync(file, 'utf8'));
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
const ROOT = 'agrippa:openapi';
const esc = (s) => s.replace(/~/g, '~0').replace(/\//g, '~1');

const ajv = new Ajv2020({ strict: true, allowUnionTypes: true, allErrors: true });
addFormats(ajv);
// The spec is the root every $ref resolves in; its top-level members are no
// schema keywords, so they are declared as annotations (nothing below them
// is compiled unless a $ref reaches it, and then strictly).
ajv.addVocabulary(Object.keys(doc));
ajv.addSchema(doc, ROOT);
const compiled = new Map();
// The validator of the schema at JSON pointer ptr of the spec.
function schemaAt(ptr) {
	if (!compiled.has(ptr)) compiled.set(ptr, ajv.compile({ $ref: `${ROOT}#${ptr}` }));
	return compiled.get(ptr);
}
// An object of the spec and its pointer, following a local $ref.
function deref(obj, ptr) {
	for (let n = 0; obj && typeof obj.$ref === 'string' && n < 10; n++) {
		ptr = obj.$ref.slice(1);
		obj = ptr.split('/').slice(1).reduce((o, k) => o?.[k.replace(/~1/g, '/').replace(/~0/g, '~')], doc);
	}
	return [obj, ptr];
}
// ajv's errors, each with its parameters (the property it did not expect,
// the type it wanted ...).
const errText = (v) => (v.errors ?? []).map((e) => `${e.instancePath || '(body)'} ${e.message} ${JSON.stringify(e.params)}`).join('\n');

// Every schema object of the spec by its pointer: the components' and those
// inline in operations (parameters, request and response bodies, headers).
function everySchema() {
	const out = Object.keys(doc.components?.schemas ?? {}).map((k) => `/components/schemas/${esc(k)}`);
	const media = (content, p) => {
		for (const [mt, m] of Object.entries(content ?? {})) if (m.schema) out.push(`${p}/content/${esc(mt)}/schema`);
	};
	const headers = (h, p) => {
		for (const [n, x] of Object.entries(h ?? {})) if (x.schema) out.push(`${p}/headers/${esc(n)}/schema`);
	};
	const params = (list, p) => (list ?? []).forEach((x, i) => x.schema && out.push(`${p}/parameters/${i}/schema`));
	for (const kind of ['responses', 'headers', 'parameters', 'requestBodies']) {
		for (const [n, x] of Object.entries(doc.components?.[kind] ?? {})) {
			const p = `/components/${kind}/${esc(n)}`;
			if (x.schema) out.push(`${p}/schema`);
			media(x.content, p);
			headers(x.headers, p);
		}
	}
	for (const [path, item] of Object.entries(doc.paths ?? {})) {
		const pp = `/paths/${esc(path)}`;
		params(item.parameters, pp);
		for (const m of METHODS) {
			const op = item[m];
			if (!op) continue;
			params(op.parameters, `${pp}/${m}`);
			if (op.requestBody) media(op.requestBody.content, `${pp}/${m}/requestBody`);
			for (const [code, r] of Object.entries(op.responses ?? {})) {
				media(r.content, `${pp}/${m}/responses/${code}`);
				headers(r.headers, `${pp}/${m}/responses/${code}`);
			}
		}
	}
	return out;
}

// ---- validate ---------------------------------------------------------------

async function validate() {
	const v = new Validator();
	const res = await v.validate(file);
	check(`the standard validator accepts ${file} as OpenAPI ${v.version ?? '?'}`, res.valid,
		JSON.stringify(res.errors, null, 1)?.slice(0, 4000));
	check(`${file} is OpenAPI 3.1`, v.version === '3.1' && /^3\.1\.\d+$/.test(doc.openapi), `openapi: ${doc.openapi}`);
	let unresolved = [];
	const walk = (o, p) => {
		if (Array.isArray(o)) o.forEach((x, i) => walk(x, `${p}/${i}`));
		else if (o && typeof o === 'object') {
			if (typeof o.$ref === 'string') {
				const [t] = deref(o, p);
				if (!o.$ref.startsWith('#/') || t === undefined) unresolved.push(`${p}: ${o.$ref}`);
			}
			for (const [k, x] of Object.entries(o)) walk(x, `${p}/${esc(k)}`);
		}
	};
	walk(doc, '');
	check(`every $ref in ${file} is local and resolves`, unresolved.length === 0, unresolved.join('\n'));
	const bad = [];
	const all = everySchema();
	for (const p of all) {
		try {
			schemaAt(p);
		} catch (e) {
			bad.push(`${p}: ${e.message}`);
		}
	}
	check(`every schema of ${file} compiles under ajv's strict JSON Schema 2020-12 (${all.length})`,
		bad.length === 0, bad.join('\n'));
}

// ---- live -------------------------------------------------------------------

const env = (k) => {
	if (!process.env[k]) throw new Error(`live: ${k} is not set`);
	return process.env[k];
};

// The spec's path template that matches path (concrete segments before
// templated ones, as OpenAPI says), and its parameters.
function matchPath(path) {
	const segs = path.split('/');
	const cands = Object.keys(doc.paths).filter((t) => {
		const ts = t.split('/');
		return ts.length === segs.length && ts.every((s, i) => /^\{.*\}$/.test(s) || s === segs[i]);
	});
	cands.sort((a, b) => (a.match(/\{/g)?.length ?? 0) - (b.match(/\{/g)?.length ?? 0));
	return cands[0];
}

const succeeded = new Set(); // "METHOD template" that answered a 2xx checked here
const seen = new Set();

// req(desc, method, path, {headers, json, body, expect}): one request, its
// answer checked against the spec.  Returns {status, headers, text, json}.
async function req(desc, method, path, o = {}) {
	const url = env('URL') + path;
	const headers = { ...(o.headers ?? {}) };
	let body = o.body;
	if (o.json !== undefined) {
		body = JSON.stringify(o.json);
		headers['Content-Type'] ??= 'application/json';
	}
	let res;
	try {
		res = await fetch(url, { method, headers, body, redirect: 'manual', signal: AbortSignal.timeout(10000) });
	} catch (e) {
		notok(`${desc}: ${method} ${path}`, e.message);
		return { status: 0, headers: new Headers(), text: '' };
	}
	const text = await res.text();
	const r = { status: res.status, headers: res.headers, text };
	const name = `${desc}: ${method} ${path.replace(/\?.*/, '')} ${res.status}`;
	const problems = [];
	if (o.expect !== undefined && res.status !== o.expect) problems.push(`expected status ${o.expect}, body ${text.slice(0, 300)}`);
	const tmpl = path.startsWith('/') ? matchPath(path.replace(/\?.*/, '')) : undefined;
	const m = method.toLowerCase();
	const op = tmpl && doc.paths[tmpl][m];
	if (!tmpl) {
		problems.push(`no path of the spec matches ${path}`);
	} else if (!op) {
		// a path the spec has with a method it does not: must be the 405
		if (res.status !== 405) problems.push(`the spec has no ${method} ${tmpl}, yet the daemon answered ${res.status}`);
		const allow = (res.headers.get('allow') ?? '').split(/, */).filter((x) => x !== 'HEAD').map((x) => x.toLowerCase()).sort();
		const want = METHODS.filter((x) => doc.paths[tmpl][x]).sort();
		if (allow.join() !== want.join()) problems.push(`Allow: ${res.headers.get('allow')} but the spec has ${want.join(', ')}`);
		const v = schemaAt('/components/schemas/Error');
		try {
			if (!v(JSON.parse(text))) problems.push(`the 405 body is no Error: ${errText(v)}`);
		} catch {
			problems.push(`the 405 body is not JSON: ${text.slice(0, 200)}`);
		}
	} else {
		seen.add(`${method} ${tmpl}`);
		const opPtr = `/paths/${esc(tmpl)}/${m}`;
		const [resp, rptr] = deref(op.responses[String(res.status)], `${opPtr}/responses/${res.status}`);
		if (!resp) {
			problems.push(`${method} ${tmpl} declares no ${res.status} (it declares ${Object.keys(op.responses).join(', ')})`);
		} else {
			const ct = (res.headers.get('content-type') ?? '').split(';')[0].trim();
			if (!resp.content) {
				if (text !== '') problems.push(`the spec declares no body for ${res.status}, got ${text.slice(0, 200)}`);
			} else if (!resp.content[ct]) {
				problems.push(`Content-Type ${ct || '(none)'} is not one of ${Object.keys(resp.content).join(', ')}`);
			} else if (ct === 'application/json' && resp.content[ct].schema) {
				let data;
				try {
					data = JSON.parse(text);
					r.json = data;
				} catch {
					problems.push(`the body is not JSON: ${text.slice(0, 200)}`);
				}
				if (data !== undefined) {
					const v = schemaAt(`${rptr}/content/${esc(ct)}/schema`);
					if (!v(data)) problems.push(`the body does not match the schema:\n${errText(v)}\n${text.slice(0, 600)}`);
				}
			}
			for (const [h, hd] of Object.entries(resp.headers ?? {})) {
				const val = res.headers.get(h);
				if (val === null) {
					if (hd.required) problems.push(`no ${h} header`);
					continue;
				}
				const [, hp] = deref(hd, `${rptr}/headers/${esc(h)}`);
				const v = schemaAt(`${hp}/schema`);
				const vals = h.toLowerCase() === 'set-cookie' ? res.headers.getSetCookie() : [val];
				for (const x of vals) {
					const typed = (hd.schema?.type === 'integer' || deref(hd, '')[0]?.schema?.type === 'integer') ? Number(x) : x;
					if (!v(typed)) problems.push(`header ${h}: ${x} does not match: ${errText(v)}`);
				}
			}
			if (res.status >= 200 && res.status < 300 && problems.length === 0) succeeded.add(`${method} ${tmpl}`);
		}
		// what we sent, against the operation's request schema
		const rb = op.requestBody && deref(op.requestBody, `${opPtr}/requestBody`);
		if (o.json !== undefined && rb?.[0]?.content?.['application/json']) {
			const v = schemaAt(`${rb[1]}/content/application~1json/schema`);
			const valid = v(o.json);
			if (res.status >= 200 && res.status < 300 && !valid)
				problems.push(`the daemon accepted a body the spec refuses: ${errText(v)}`);
			const code = r.json?.error?.code;
			if (['unknown_field', 'missing_field', 'invalid_field'].includes(code) && r.json?.error?.field &&
			    valid && o.schemaRefuses !== false)
				problems.push(`the daemon refused (${code} ${r.json.error.field}) a body the spec accepts`);
		}
	}
	if (problems.length) notok(name, problems.join('\n'));
	else ok(name);
	return r;
}

// Server-Sent Events read to the end of the stream.
function sseMessages(text) {
	const out = [];
	for (const block of text.split('\n\n')) {
		const msg = {};
		for (const line of block.split('\n')) {
			if (line === '' || line.startsWith(':')) continue;
			const i = line.indexOf(':');
			const k = line.slice(0, i), v = line.slice(i + 1).replace(/^ /, '');
			msg[k] = v;
		}
		if (msg.id !== undefined || msg.event !== undefined || msg.data !== undefined) out.push(msg);
	}
	return out;
}

async function live() {
	const TA = env('TOKEN'), TV = env('VIEWER'), P1 = env('P1'), RW = env('RUN_WAITING'), ART = env('ARTIFACT');
	const origin = env('URL');
	const bearer = (t) => ({ Authorization: `Bearer ${t}` });
	const A = bearer(TA), V = bearer(TV);
	const U0 = '00000000-0000-4000-8000-000000000000';

	await req('health', 'GET', '/healthz', { expect: 200 });

	// sessions
	const s = await req('sign in', 'POST', '/v1/session', { json: { token: TA }, expect: 200 });
	const cookie = (s.headers.getSetCookie?.() ?? [])[0]?.split(';')[0] ?? '';
	const csrf = s.json?.csrf_token ?? '';
	check('the session cookie is HttpOnly and SameSite=Strict', /HttpOnly; SameSite=Strict/.test(s.headers.get('set-cookie') ?? ''));
	const C = { Cookie: cookie };
	const CW = { Cookie: cookie, 'X-CSRF-Token': csrf, Origin: origin };
	const g = await req('session state with the cookie', 'GET', '/v1/session', { headers: C, expect: 200 });
	check('... says session true with the same CSRF token', g.json?.session === true && g.json?.csrf_token === csrf);
	const g0 = await req('session state without a cookie', 'GET', '/v1/session', { expect: 200 });
	check('... says session false', g0.json?.session === false);
	await req('sign in with a bad token', 'POST', '/v1/session', { json: { token: 'agr_AAAA' }, expect: 401 });
	await req('sign in from another origin', 'POST', '/v1/session',
		{ json: { token: TA }, headers: { Origin: 'http://evil.example' }, expect: 403 });
	await req('sign in with a member too many', 'POST', '/v1/session', { json: { token: TA, x: 1 }, expect: 422 });
	await req('sign in without the token', 'POST', '/v1/session', { json: {}, expect: 422 });

	// users and projects
	await req('me', 'GET', '/v1/me', { headers: A, expect: 200 });
	await req('me with the cookie', 'GET', '/v1/me', { headers: C, expect: 200 });
	const e401 = await req('me without credentials', 'GET', '/v1/me', { expect: 401 });
	check('... with WWW-Authenticate: Bearer', e401.headers.get('www-authenticate') === 'Bearer');
	await req('an unknown query parameter', 'GET', '/v1/projects?x=1', { headers: A, expect: 400 });
	await req('projects', 'GET', '/v1/projects', { headers: A, expect: 200 });
	await req('a project', 'GET', `/v1/projects/${P1}`, { headers: A, expect: 200 });
	await req('an unknown project', 'GET', `/v1/projects/${U0}`, { headers: A, expect: 404 });
	await req('a path the spec has, with a method it does not', 'PUT', `/v1/projects/${P1}`, { headers: A, expect: 405 });
	await req('members', 'GET', `/v1/projects/${P1}/members`, { headers: V, expect: 200 });
	const mem = await req('add a member (with the cookie, its CSRF token and origin)', 'POST', `/v1/projects/${P1}/members`,
		{ headers: CW, json: { user: 'nora', role: 'viewer' }, expect: 201 });
	await req('add them again', 'POST', `/v1/projects/${P1}/members`,
		{ headers: A, json: { user: 'nora', role: 'viewer' }, expect: 409 });
	await req('add a user who does not exist', 'POST', `/v1/projects/${P1}/members`,
		{ headers: A, json: { user: 'nobody', role: 'viewer' }, expect: 422, schemaRefuses: false });
	await req('the cookie without its CSRF token', 'POST', `/v1/projects/${P1}/members`,
		{ headers: { Cookie: cookie, Origin: origin }, json: { user: 'nora', role: 'viewer' }, expect: 403 });
	await req('the cookie from another origin', 'POST', `/v1/projects/${P1}/members`,
		{ headers: { ...CW, Origin: 'http://evil.example' }, json: { user: 'nora', role: 'viewer' }, expect: 403 });
	const MID = mem.json?.membership_id ?? U0;
	await req('change a role', 'PATCH', `/v1/memberships/${MID}`, { headers: A, json: { role: 'member' }, expect: 200 });
	await req('a role that is none', 'PATCH', `/v1/memberships/${MID}`, { headers: A, json: { role: 'owner' }, expect: 422 });
	await req('remove a membership', 'DELETE', `/v1/memberships/${MID}`, { headers: A, expect: 200 });
	await req('remove it again', 'DELETE', `/v1/memberships/${MID}`, { headers: A, expect: 404 });
	await req('grants', 'GET', `/v1/projects/${P1}/grants`, { headers: V, expect: 200 });

	// repositories
	const repo = await req('add a repository', 'POST', `/v1/projects/${P1}/repos`, {
		headers: A, expect: 201,
		json: { name: 'web', url: 'https://git.example.com/team/web.git', token: 'tok-123', forge: 'gitlab',
			api_url: 'https://git.example.com/api/v4' },
	});
	// refused by the forge check, with a token in the body (which is wiped
	// before the answer frees it)
	await req('a forge URL that names no project, with a token', 'POST', `/v1/projects/${P1}/repos`,
		{ headers: A, json: { name: 'web3', url: 'https://git.example.com/web.git', token: 'tok-1', forge: 'gitlab' },
		  expect: 422, schemaRefuses: false });
	await req('httpd still answers after it', 'GET', '/v1/me', { headers: A, expect: 200 });
	await req('add it again', 'POST', `/v1/projects/${P1}/repos`,
		{ headers: A, json: { name: 'web', url: 'https://git.example.com/web.git' }, expect: 409 });
	await req('a viewer adds a repository', 'POST', `/v1/projects/${P1}/repos`,
		{ headers: V, json: { name: 'web2', url: 'https://git.example.com/web.git' }, expect: 403 });
	await req('repositories', 'GET', `/v1/projects/${P1}/repos`, { headers: V, expect: 200 });
	await req('remove a repository', 'DELETE', `/v1/repos/${repo.json?.id ?? U0}`, { headers: A, expect: 200 });

	// usage and audit
	await req('usage', 'GET', `/v1/projects/${P1}/usage`, { headers: V, expect: 200 });
	await req('usage of a month', 'GET', `/v1/projects/${P1}/usage?month=2020-01`, { headers: V, expect: 200 });
	await req('usage of no month', 'GET', `/v1/projects/${P1}/usage?month=2020-13`, { headers: V, expect: 400 });
	await req('audit', 'GET', `/v1/projects/${P1}/audit?limit=2`, { headers: A, expect: 200 });
	await req('audit for a viewer', 'GET', `/v1/projects/${P1}/audit`, { headers: V, expect: 403 });

	// runs
	const submit = { template: 'run-tests', params: { repo: 'myrepo' } };
	const idem = { ...A, 'Idempotency-Key': 'openapi-1' };
	const run = await req('submit a run', 'POST', `/v1/projects/${P1}/runs`, { headers: idem, json: submit, expect: 201 });
	await req('submit it again with its key', 'POST', `/v1/projects/${P1}/runs`, { headers: idem, json: submit, expect: 200 });
	await req('its key for another submit', 'POST', `/v1/projects/${P1}/runs`,
		{ headers: idem, json: { template: 'run-tests', params: { repo: 'myrepo', test_command: 'true' } }, expect: 409 });
	await req('a bad Idempotency-Key', 'POST', `/v1/projects/${P1}/runs`,
		{ headers: { ...A, 'Idempotency-Key': 'a b' }, json: submit, expect: 400 });
	await req('an unknown template', 'POST', `/v1/projects/${P1}/runs`,
		{ headers: A, json: { template: 'nope' }, expect: 422 });
	await req('bad parameters', 'POST', `/v1/projects/${P1}/runs`,
		{ headers: A, json: { template: 'run-tests', params: { repo: 'nope', extra: 1 } }, expect: 422 });
	await req('a body that is not JSON', 'POST', `/v1/projects/${P1}/runs`,
		{ headers: { ...A, 'Content-Type': 'application/json' }, body: '{"template":', expect: 400 });
	await req('a body that is not application/json', 'POST', `/v1/projects/${P1}/runs`,
		{ headers: { ...A, 'Content-Type': 'text/plain' }, body: '{}', expect: 415 });
	await req('a member the route does not take', 'POST', `/v1/projects/${P1}/runs`,
		{ headers: A, json: { ...submit, priority: 1 }, expect: 422 });
	await req('a member of the wrong type', 'POST', `/v1/projects/${P1}/runs`,
		{ headers: A, json: { template: 1 }, expect: 422 });
	await req('a viewer submits', 'POST', `/v1/projects/${P1}/runs`, { headers: V, json: submit, expect: 403 });
	const R = run.json?.id ?? U0;
	const page = await req('runs', 'GET', `/v1/projects/${P1}/runs?limit=1`, { headers: V, expect: 200 });
	await req('the next page', 'GET', `/v1/projects/${P1}/runs?limit=1&cursor=${page.json?.next_cursor ?? U0}`,
		{ headers: V, expect: 200 });
	await req('runs by status and template', 'GET', `/v1/projects/${P1}/runs?status=queued&template=run-tests`,
		{ headers: V, expect: 200 });
	await req('a cursor of no run', 'GET', `/v1/projects/${P1}/runs?cursor=${U0}`, { headers: V, expect: 400 });
	await req('a run', 'GET', `/v1/runs/${R}`, { headers: V, expect: 200 });
	await req('a run that is waiting', 'GET', `/v1/runs/${RW}`, { headers: V, expect: 200 });
	await req('an unknown run', 'GET', `/v1/runs/${U0}`, { headers: V, expect: 404 });
	await req('a malformed id', 'GET', '/v1/runs/not-a-uuid', { headers: V, expect: 404 });
	await req('set a budget', 'POST', `/v1/runs/${R}/budget`, { headers: A, json: { usd_micros: 5000000 }, expect: 200 });
	await req('set a phase budget', 'POST', `/v1/runs/${R}/budget`,
		{ headers: A, json: { usd_micros: 500000, phase: 'test' }, expect: 200 });
	await req('a phase the template has not', 'POST', `/v1/runs/${R}/budget`,
		{ headers: A, json: { usd_micros: 1, phase: 'nope' }, expect: 422, schemaRefuses: false });
	await req('a budget out of range', 'POST', `/v1/runs/${R}/budget`,
		{ headers: A, json: { usd_micros: 100000000001 }, expect: 422 });
	await req('steps', 'GET', `/v1/runs/${RW}/steps`, { headers: V, expect: 200 });
	await req('events', 'GET', `/v1/runs/${RW}/events?after=0&limit=10`, { headers: V, expect: 200 });
	await req('approvals of a run', 'GET', `/v1/runs/${RW}/approvals`, { headers: V, expect: 200 });
	const inbox = await req('the inbox', 'GET', '/v1/approvals', { headers: A, expect: 200 });
	check('... holds the waiting run\'s approval', (inbox.json?.approvals ?? []).some((a) => a.run_id === RW));
	const AP = inbox.json?.approvals?.find((a) => a.run_id === RW)?.id ?? U0;
	await req('a viewer decides', 'POST', `/v1/approvals/${AP}/decide`, { headers: V, json: { decision: 'approved' }, expect: 403 });
	await req('decide', 'POST', `/v1/approvals/${AP}/decide`,
		{ headers: CW, json: { decision: 'approved', comment: 'fine' }, expect: 200 });
	await req('decide again', 'POST', `/v1/approvals/${AP}/decide`, { headers: A, json: { decision: 'rejected' }, expect: 409 });
	await req('artifacts', 'GET', `/v1/runs/${RW}/artifacts`, { headers: V, expect: 200 });
	const art = await req('an artifact', 'GET', `/v1/artifacts/${ART}`, { headers: V, expect: 200 });
	await req('an artifact not modified', 'GET', `/v1/artifacts/${ART}`,
		{ headers: { ...V, 'If-None-Match': art.headers.get('etag') ?? '' }, expect: 304 });
	await req('an unknown artifact', 'GET', `/v1/artifacts/${U0}`, { headers: V, expect: 404 });
	await req('a viewer cancels', 'POST', `/v1/runs/${R}/cancel`, { headers: V, expect: 403 });
	await req('cancel a queued run', 'POST', `/v1/runs/${R}/cancel`, { headers: A, expect: 200 });
	await req('cancel it again', 'POST', `/v1/runs/${R}/cancel`, { headers: A, expect: 409 });
	await req('cancel a running run', 'POST', `/v1/runs/${env('RUN_RUNNING')}/cancel`, { headers: A, expect: 202 });
	await req('a budget for an ended run', 'POST', `/v1/runs/${R}/budget`, { headers: A, json: { usd_micros: 1 }, expect: 409 });

	// the event stream of the ended run: every message, to its end
	const st = await req('the event stream', 'GET', `/v1/runs/${R}/events/stream`, { headers: V, expect: 200 });
	const msgs = sseMessages(st.text);
	const sv = schemaAt('/components/schemas/StreamMessage');
	const badm = [];
	for (const mm of msgs) {
		let data;
		try {
			data = JSON.parse(mm.data);
		} catch {
			data = mm.data;
		}
		const x = { id: Number(mm.id), event: mm.event, data };
		if (!sv(x)) badm.push(`${JSON.stringify(mm)}: ${errText(sv)}`);
	}
	check(`every message of the stream is a StreamMessage (${msgs.length})`, msgs.length >= 2 && badm.length === 0, badm.join('\n'));
	check('... starting with retry and ending with the terminal event',
		st.text.startsWith('retry: ') && msgs.at(-1)?.event === 'run.cancelled', st.text.slice(0, 400));
	check('... and the spec names the message schema of its media type',
		doc.paths['/v1/runs/{id}/events/stream'].get.responses['200'].content['text/event-stream']['x-sse-message']?.$ref ===
		'#/components/schemas/StreamMessage');
	await req('the stream of a client that has everything', 'GET', `/v1/runs/${R}/events/stream`,
		{ headers: { ...V, 'Last-Event-ID': msgs.at(-1)?.id ?? '0' }, expect: 204 });
	await req('a Last-Event-ID that is no seq', 'GET', `/v1/runs/${R}/events/stream`,
		{ headers: { ...V, 'Last-Event-ID': 'x' }, expect: 400 });

	// templates
	await req('templates', 'GET', '/v1/templates', { headers: V, expect: 200 });
	await req('a template', 'GET', '/v1/templates/run-tests', { headers: V, expect: 200 });
	await req('an unknown template', 'GET', '/v1/templates/nope', { headers: V, expect: 404 });
	await req('validate a template', 'POST', '/v1/templates/validate',
		{ headers: V, json: { source: fs.readFileSync('templates/run-tests.yaml', 'utf8') }, expect: 200 });
	await req('validate a broken template', 'POST', '/v1/templates/validate',
		{ headers: V, json: { source: 'name: [unclosed' }, expect: 422 });

	// the session ends
	await req('end a session with a bearer token', 'DELETE', '/v1/session', { headers: A, expect: 404 });
	await req('end the session', 'DELETE', '/v1/session', { headers: CW, expect: 200 });
	const g2 = await req('session state with the ended cookie', 'GET', '/v1/session', { headers: C, expect: 200 });
	check('... says session false', g2.json?.session === false);
	await req('the ended cookie', 'GET', '/v1/me', { headers: C, expect: 401 });

	const ops = [];
	for (const [p, item] of Object.entries(doc.paths)) for (const m of METHODS) if (item[m]) ops.push(`${m.toUpperCase()} ${p}`);
	const missing = ops.filter((x) => !succeeded.has(x));
	check(`every operation of the spec answered a success that matches its schema (${succeeded.size} of ${ops.length})`,
		missing.length === 0, `no checked success from: ${missing.join(', ')}`);
}

try {
	await (mode === 'validate' ? validate() : live());
} catch (e) {
	notok(`openapi.mjs ${mode}`, e.stack);
}
process.exit(failed ? 1 : 0);
