// The page's bearer token (docs/page.md): the page's data routes (/page/samples…, sets…,
// reference…, corpus…) take a token of the sink role or above, as the dashboard's API does. It is
// kept in this tab only (sessionStorage, under the dashboard's key), sent as
// `Authorization: Bearer <token>` with every data request, asked for with a login form where
// there is none, and asked for again, with the service's message, when the service answers 401.
// The token never goes into a URL. Everything is written with textContent, never as HTML.
import { WaiError } from "./dispatch/tokens.js";

export const TOKEN_KEY = "wai-dispatch.token";

export function token() { return sessionStorage.getItem(TOKEN_KEY); }

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  Object.assign(node, props || {});
  node.append(...children);
  return node;
}

/** The login view (made once): a form for the token; submitting it keeps the token and reloads
 * the page, which starts again with it. */
function loginView() {
  let view = document.getElementById("login-view");
  if (view) return view;
  const input = el("input", { id: "token", name: "token", type: "password", autocomplete: "off", required: true });
  const form = el("form", { id: "login-form" },
    el("h2", {}, "Log in"),
    el("p", {}, "The page reads the service's samples and parameter sets with a bearer token of the sink role or above (",
      el("code", {}, "wai-dispatch tokens create NAME --role sink"), "). It is kept in this tab only (sessionStorage)."),
    el("label", { htmlFor: "token" }, "Bearer token "), input, " ",
    el("button", { type: "submit" }, "Open the page"),
    el("p", { id: "login-message", role: "alert" }));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, input.value.trim());
    location.reload();
  });
  view = el("section", { id: "login-view", hidden: true }, form);
  const main = document.querySelector("main");
  main.parentNode.insertBefore(view, main);
  return view;
}

/** Show the login view (the page's own view hidden), with ``message``; the kept token is dropped. */
export function showLogin(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  const view = loginView();
  document.querySelector("main").hidden = true;
  view.hidden = false;
  document.getElementById("login-message").textContent = message || "";
  document.getElementById("token").focus();
}

/** The kept token, or the login view shown and a ``token_missing`` error thrown. */
export function requireToken() {
  const kept = token();
  if (!kept) {
    showLogin("");
    throw new WaiError("token_missing", "log in with a bearer token to use the page");
  }
  return kept;
}

/** ``fetch(url)`` of the page's data with the token; a 401 or 403 shows the login view again with
 * the service's message and throws a WaiError of the service's code. */
export async function pageFetch(url) {
  const res = await fetch(url, { headers: { Authorization: "Bearer " + requireToken() } });
  if (res.status === 401 || res.status === 403) {
    let code = "token_unknown";
    let detail = "";
    try {
      const body = await res.json();
      code = body.error.code;
      detail = body.error.message;
    } catch { /* no JSON body */ }
    showLogin(`The service refused the token (${res.status} ${code}: ${detail}). Log in again.`);
    throw new WaiError(code, detail || `HTTP ${res.status}`);
  }
  return res;
}
