// Every call goes to /api/v1 with the key from sessionStorage as a bearer header (no cookies,
// so no CSRF surface). A 401 forgets the key, which sends the user back to the login page.
const KEY = "sluice.apiKey";
const listeners = new Set();

export const getKey = () => sessionStorage.getItem(KEY);
export function setKey(key) {
  if (key) sessionStorage.setItem(KEY, key);
  else sessionStorage.removeItem(KEY);
  listeners.forEach((fn) => fn(key));
}
export const onKeyChange = (fn) => (listeners.add(fn), () => listeners.delete(fn));

export class ApiError extends Error {
  constructor(status, body) {
    super((body && (body.detail || body.reason)) || `HTTP ${status}`);
    this.status = status;
    this.body = body || {};
    this.problems = (body && body.problems) || [];
  }
}

export async function api(path, { method = "GET", body, query, key } = {}) {
  const url = new URL(`/api/v1${path}`, location.origin);
  for (const [name, value] of Object.entries(query || {})) {
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(name, value);
  }
  const headers = { Authorization: `Bearer ${key || getKey()}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(url, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = { detail: text };
  }
  if (response.status === 401 && !key) setKey(null);
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

export const enc = encodeURIComponent;
