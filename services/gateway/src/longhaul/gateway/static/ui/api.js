// HTTP access to the gateway. The API key lives in sessionStorage (never in the URL) and
// travels in the Authorization header; refusals become errors carrying the API's message.
const KEY = "longhaul.apiKey";

export function apiKey() { return sessionStorage.getItem(KEY) || ""; }
export function setApiKey(value) {
  if (value) sessionStorage.setItem(KEY, value); else sessionStorage.removeItem(KEY);
}

export function authHeaders(extra) {
  const h = Object.assign({}, extra || {});
  const key = apiKey();
  if (key) h["Authorization"] = "Bearer " + key;
  return h;
}

export class ApiError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}

export async function api(path, options) {
  const opts = Object.assign({}, options || {});
  opts.headers = authHeaders(opts.headers);
  if (opts.json !== undefined) {
    opts.method = opts.method || "POST";
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(opts.json);
    delete opts.json;
  }
  const response = await fetch(path, opts);
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    const err = (body && body.error) || {};
    throw new ApiError(response.status, err.code || "http_" + response.status,
                       err.message || response.statusText || "HTTP " + response.status);
  }
  return body;
}

export const post = (path, json) => api(path, { method: "POST", json: json || {} });
export const enc = encodeURIComponent;
