// The HTTP API from the page: the session cookie (HttpOnly, so no script
// here ever sees it) authenticates; state-changing calls add the session's
// CSRF token.  The long-lived API token is sent once, in the body of
// POST /v1/session, and never kept.
let csrf = null;
let onSignedOut = () => {};

export class ApiError extends Error {
  constructor(status, body) {
    super((body && body.error && body.error.message) || 'HTTP ' + status);
    this.status = status;
    this.code = body && body.error && body.error.code;
  }
}

export function signedOut(fn) { onSignedOut = fn; }

export async function call(method, path, body) {
  const headers = { Accept: 'application/json' };
  if (method !== 'GET') {
    if (csrf) headers['X-CSRF-Token'] = csrf;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
  }
  const r = await fetch(path, {
    method, headers, credentials: 'same-origin', cache: 'no-store',
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data = null;
  if (r.status !== 204) {
    const text = await r.text();
    try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  }
  if (r.status === 401 && path !== '/v1/session') { csrf = null; onSignedOut(); }
  if (!r.ok) throw new ApiError(r.status, data);
  return data;
}

export const get = (p) => call('GET', p);
export const post = (p, b) => call('POST', p, b);

// Whether a session is there (and its CSRF token, for after a reload).
export async function resume() {
  try {
    const s = await get('/v1/session');
    csrf = s.session ? s.csrf_token : null;
    return s.session;
  } catch {
    return false;
  }
}

export async function login(token) {
  const s = await call('POST', '/v1/session', { token });
  csrf = s.csrf_token;
  return s;
}

export async function logout() {
  try { await call('DELETE', '/v1/session'); } finally { csrf = null; }
}

export function qs(params) {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') u.set(k, v);
  const s = u.toString();
  return s ? '?' + s : '';
}
