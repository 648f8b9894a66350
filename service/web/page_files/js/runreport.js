// Opt-in: the page's decode reported to the service as a run report (`wai-run-report/1`,
// docs/run-reports.md), so browser decodes reach the operator's dashboard like any fleet sink's.
// Off by default; the user ticks the box and names the sink their token carries (the service
// refuses a run report for another sink with run_report_sink_mismatch and names the token's).
// POST /v1/run-reports with the page's bearer token; the service's verdict (or error) comes back.
import { showLogin, token } from "./auth.js";

const ID_CHARS = /[^A-Za-z0-9._:-]/g;

/** A fresh run report id (1 to 128 of A-Z a-z 0-9 . _ : -), one per decode. */
export function runReportId() {
  const unique = crypto.randomUUID ? crypto.randomUUID() : `${Date.now()}-${Math.random().toString(16).slice(2)}`;
  return `page-${unique}`.replace(ID_CHARS, "-").slice(0, 128);
}

/** The run report of one decode: its entries `{set_digest, symbols_digest, report}`. */
export function runReport(decodes, sink, id = runReportId()) {
  return { format: "wai-run-report/1", id, sink, decodes };
}

/** POST the run report; returns `{ok, status, id, verdict}` or `{ok: false, status, id, error}`
 * (`error.code` is the service's, or null where the service gave none).
 * A 401 brings the login back (the token is no longer live); nothing throws. */
export async function postRunReport(body) {
  const url = new URL("../v1/run-reports", document.baseURI).href; // the service below /page/
  let res;
  try {
    res = await fetch(url, {
      method: "POST",
      headers: { Authorization: "Bearer " + token(), "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
  } catch (err) {
    return { ok: false, status: 0, id: body.id, error: { code: null, message: `the service did not answer: ${err.message}` } };
  }
  let answer = null;
  try { answer = await res.json(); } catch { /* no JSON body */ }
  if (res.ok && answer) return { ok: true, status: res.status, id: body.id, verdict: answer };
  const error = (answer && answer.error) || { code: null, message: `HTTP ${res.status} ${res.statusText}` };
  if (res.status === 401) showLogin(`The service refused the token (401 ${error.code}: ${error.message}). Log in again.`);
  return { ok: false, status: res.status, id: body.id, error };
}
