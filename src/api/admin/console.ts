/**
 * The operations console (`/console`): server-rendered pages over the operator's actions
 * (operator.ts), every value escaped (src/domain/html.ts), one stylesheet and one small script of
 * its own, a strict Content-Security-Policy, no third-party request. Log in with an operator token;
 * the session is an HttpOnly, SameSite=Strict cookie held by this server process, and every form
 * carries the session's CSRF token. Changes are POSTs answered by a redirect (303) back to the page.
 * Times are shown in JST with their offset.
 */
import { randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { escapeHtml } from '../../domain/html';
import { KessaiError } from '../../domain/errors';
import { MAX_TEXT_LENGTH } from '../../domain/limits';
import { formatJst, parseInstant } from '../../domain/time';
import type { Operator } from './operator';
import { assertOperatorChannel, type OperatorTokens } from './operator-tokens';
import { toV1Error } from '../v1/codec';

export const CONSOLE_PREFIX = '/console';
const COOKIE = 'kessai_console';
/** A console session lasts this long after login. */
const SESSION_MS = 12 * 60 * 60 * 1000;
const SESSIONS_MAX = 1_000;

const SECURITY_POLICY = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

const STYLE = `body{font-family:system-ui,sans-serif;margin:0;background:#f4f5f7;color:#1a1a1a}
header{background:#1d2a3a;color:#fff;padding:.5rem 1.5rem;display:flex;gap:1.5rem;align-items:center}
header a{color:#fff}header form{margin-left:auto}main{padding:1rem 1.5rem}
table{border-collapse:collapse;background:#fff;margin-bottom:1.5rem;width:100%}
th,td{text-align:left;padding:.35rem .5rem;border-bottom:1px solid #ddd;vertical-align:top}td.n{text-align:right}
.bad{color:#a00000;font-weight:600}.ok{color:#0a6b2d}.notice{background:#e6f4ea;border:1px solid #0a6b2d;padding:.5rem 1rem}
.error{background:#fdecea;border:1px solid #a00000;padding:.5rem 1rem}
button{font-size:.95rem;padding:.3rem .7rem;border-radius:.25rem;border:1px solid #0b4f9c;background:#0b5fbf;color:#fff;cursor:pointer}
button:focus-visible,a:focus-visible,input:focus-visible,select:focus-visible,summary:focus-visible{outline:3px solid #f5a623;outline-offset:2px}
label{display:block;font-weight:600;margin:.5rem 0 .25rem}input{font-size:1rem;padding:.4rem;width:24rem;max-width:100%}
fieldset{background:#fff;border:1px solid #ccc;margin:0 0 1.5rem;padding:.5rem 1rem 1rem}legend{font-weight:700}select{font-size:1rem;padding:.35rem}
.secret{font-family:monospace;background:#fff8e1;padding:.2rem .4rem}
pre{white-space:pre-wrap;word-break:break-all;font-size:.85rem;background:#f8f8f8;padding:.5rem}`;

/** The console's script: a form sends once (its button is disabled while the answer comes). */
const SCRIPT = `'use strict';
document.addEventListener('submit', function (event) {
  var form = event.target;
  if (form.dataset.sent === 'yes') { event.preventDefault(); return; }
  form.dataset.sent = 'yes';
  var button = form.querySelector('button');
  if (button) { button.disabled = true; button.setAttribute('aria-busy', 'true'); }
});
`;

interface Session {
  readonly who: string;
  readonly csrf: string;
  readonly until: number;
}

export interface ConsoleOptions {
  readonly tokens: OperatorTokens;
  readonly operatorFor: (who: string) => Operator;
  /** The server's monotonic time in ms (sessions expire on it). */
  readonly nowMs?: () => number;
}

const h = escapeHtml;
const jst = (value: Date | null | undefined): string => (value ? h(formatJst(value)) : '—');
const enc = encodeURIComponent;

function page(title: string, body: string, session: Session | null, notice?: string): string {
  const nav = session
    ? `<header><strong>kessai console</strong><nav aria-label="Sections"><a href="${CONSOLE_PREFIX}">Overview</a> · <a href="${CONSOLE_PREFIX}/jobs">Job ledger</a> · <a href="${CONSOLE_PREFIX}/accounts">Accounts</a></nav><span>operator: ${h(session.who)}</span><form method="post" action="${CONSOLE_PREFIX}/logout">${csrfField(session)}<button type="submit">Log out</button></form></header>`
    : '<header><strong>kessai console</strong></header>';
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${h(title)} · kessai console</title><meta name="viewport" content="width=device-width, initial-scale=1"><link rel="stylesheet" href="${CONSOLE_PREFIX}/console.css"><script src="${CONSOLE_PREFIX}/console.js" defer></script></head><body>${nav}<main><h1>${h(title)}</h1>${notice ? `<p class="notice" role="status">${h(notice)}</p>` : ''}${body}</main></body></html>`;
}

const csrfField = (session: Session): string => `<input type="hidden" name="csrf" value="${h(session.csrf)}">`;

/** A POST form of one button (every control labelled by its text). */
function action(session: Session, path: string, label: string, fields: Record<string, string> = {}): string {
  const hidden = Object.entries(fields).map(([name, value]) => `<input type="hidden" name="${h(name)}" value="${h(value)}">`).join('');
  return `<form method="post" action="${h(path)}">${csrfField(session)}${hidden}<button type="submit">${h(label)}</button></form>`;
}

/** A labelled text input (every control labelled). */
function field(id: string, label: string, attributes = ''): string {
  return `<label for="${h(id)}">${h(label)}</label><input id="${h(id)}" name="${h(id)}" ${attributes}>`;
}

/** A labelled choice of values (the first is chosen by default). */
function choice(id: string, label: string, options: readonly (readonly [string, string])[]): string {
  return `<label for="${h(id)}">${h(label)}</label><select id="${h(id)}" name="${h(id)}">${options.map(([value, text]) => `<option value="${h(value)}">${h(text)}</option>`).join('')}</select>`;
}

/** A POST form of labelled fields with a legend and one submit button. */
function form(session: Session, path: string, legend: string, fields: string, button: string, hidden: Record<string, string> = {}): string {
  const extra = Object.entries(hidden).map(([name, value]) => `<input type="hidden" name="${h(name)}" value="${h(value)}">`).join('');
  return `<form method="post" action="${h(path)}"><fieldset><legend>${h(legend)}</legend>${csrfField(session)}${extra}${fields}<p><button type="submit">${h(button)}</button></p></fieldset></form>`;
}

const MODES = [['test', 'test'], ['live', 'live']] as const;
const livemodeOf = (request: FastifyRequest): boolean => (request.query as Record<string, unknown>).mode === 'live';
const modeName = (livemode: boolean): string => (livemode ? 'live' : 'test');
const fromUnix = (seconds: number | null | undefined): Date | null => (seconds === null || seconds === undefined ? null : new Date(seconds * 1000));

/** A whole number of yen from a form field, or `invalid_amount` naming it. */
function yenOf(value: string | undefined, param: string): number {
  if (value === undefined || !/^-?\d{1,12}$/.test(value.trim())) throw new KessaiError('invalid_amount', { param, message: `${param} must be a whole number of yen, e.g. 5000 or -5000` });
  return Number(value.trim());
}

/** An instant typed in a form field (parseInstant: JST without a zone), or `invalid_timestamp` naming it. */
function consoleInstant(value: string | undefined, param: string): Date {
  try {
    return parseInstant((value ?? '').trim());
  } catch (error) {
    throw new KessaiError('invalid_timestamp', { param, message: (error as Error).message });
  }
}

function table(caption: string, headers: readonly string[], rows: readonly string[][]): string {
  if (rows.length === 0) return `<h2>${h(caption)}</h2><p>None.</p>`;
  return `<table><caption class="visually-hidden">${h(caption)}</caption><thead><tr>${headers.map((x) => `<th scope="col">${h(x)}</th>`).join('')}</tr></thead><tbody>${rows.map((r) => `<tr>${r.map((c) => `<td>${c}</td>`).join('')}</tr>`).join('')}</tbody></table>`;
}

export async function registerConsole(app: FastifyInstance, options: ConsoleOptions): Promise<void> {
  const sessions = new Map<string, Session>();
  const nowMs = options.nowMs ?? (() => performance.now());
  const route = { config: { public: true } } as const;

  const sessionOf = (request: FastifyRequest): Session | null => {
    const cookie = request.headers.cookie?.split(';').map((part) => part.trim()).find((part) => part.startsWith(`${COOKIE}=`));
    const id = cookie?.slice(COOKIE.length + 1);
    const session = id === undefined ? undefined : sessions.get(id);
    if (!session || session.until < nowMs()) return null;
    return session;
  };
  const send = (reply: FastifyReply, status: number, html: string) =>
    reply.code(status).type('text/html; charset=utf-8').header('content-security-policy', SECURITY_POLICY).header('cache-control', 'no-store').header('x-content-type-options', 'nosniff').header('referrer-policy', 'no-referrer').send(html);
  /** A page that needs a session: without one, the login page. */
  const guarded = (render: (request: FastifyRequest, session: Session, op: Operator) => Promise<{ title: string; body: string }>) => async (request: FastifyRequest, reply: FastifyReply) => {
    assertOperatorChannel(request);
    const session = sessionOf(request);
    if (!session) return reply.code(303).header('location', `${CONSOLE_PREFIX}/login`).send();
    const notice = (request.query as Record<string, unknown>).done;
    try {
      const { title, body } = await render(request, session, options.operatorFor(session.who));
      return send(reply, 200, page(title, body, session, typeof notice === 'string' ? notice : undefined));
    } catch (error) {
      const refusal = toV1Error(error);
      return send(reply, refusal.status, page('Not possible', `<p class="error" role="alert">${h(refusal.code)}${refusal.param ? ` (${h(refusal.param)})` : ''}: ${h(refusal.message)}</p>`, session));
    }
  };
  /** A change: session and CSRF token checked, then back to `back` with what was done. */
  const change = (perform: (body: Record<string, string>, op: Operator, request: FastifyRequest) => Promise<{ back: string; done: string } | { title: string; body: string; done: string }>) => async (request: FastifyRequest, reply: FastifyReply) => {
    assertOperatorChannel(request);
    const session = sessionOf(request);
    if (!session) return reply.code(303).header('location', `${CONSOLE_PREFIX}/login`).send();
    const body = (request.body ?? {}) as Record<string, unknown>;
    const fields = Object.fromEntries(Object.entries(body).filter((pair): pair is [string, string] => typeof pair[1] === 'string'));
    const given = Buffer.from(fields.csrf ?? '');
    const expected = Buffer.from(session.csrf);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return send(reply, 403, page('Refused', '<p class="error" role="alert">This form has expired: reload the page and try again.</p>', session));
    try {
      const result = await perform(fields, options.operatorFor(session.who), request);
      // A secret made by the change is shown on this answer, once, never put in a URL.
      if ('body' in result) return send(reply, 200, page(result.title, result.body, session, result.done));
      const { back, done } = result;
      return reply.code(303).header('location', `${back}${back.includes('?') ? '&' : '?'}done=${enc(done)}`).send();
    } catch (error) {
      const refusal = toV1Error(error);
      return send(reply, refusal.status, page('Not done', `<p class="error" role="alert">${h(refusal.code)}${refusal.param ? ` (${h(refusal.param)})` : ''}: ${h(refusal.message)}</p>`, session));
    }
  };

  app.get('/console.css', route, async (_request, reply) => reply.type('text/css; charset=utf-8').header('cache-control', 'no-cache').send(`${STYLE}\n.visually-hidden{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}`));
  app.get('/console.js', route, async (_request, reply) => reply.type('text/javascript; charset=utf-8').header('cache-control', 'no-cache').send(SCRIPT));

  app.get('/login', route, async (request, reply) => {
    assertOperatorChannel(request);
    return send(reply, 200, page('Log in', `<form method="post" action="${CONSOLE_PREFIX}/login"><label for="token">Operator token</label><input id="token" name="token" type="password" autocomplete="current-password" required><p><button type="submit">Log in</button></p></form>`, null));
  });
  app.post('/login', route, async (request, reply) => {
    assertOperatorChannel(request);
    const token = (request.body as Record<string, unknown> | undefined)?.token;
    const who = options.tokens.nameOf(typeof token === 'string' ? token : undefined);
    // Answered 200 with the form again, as a login form is (the browser logs no failed load).
    if (who === undefined) return send(reply, 200, page('Log in', `<p class="error" role="alert">That is not an operator token.</p><p><a href="${CONSOLE_PREFIX}/login">Try again</a></p>`, null));
    if (sessions.size >= SESSIONS_MAX) for (const [id, s] of sessions) if (s.until < nowMs()) sessions.delete(id);
    if (sessions.size >= SESSIONS_MAX) sessions.clear();
    const id = randomBytes(24).toString('base64url');
    sessions.set(id, { who, csrf: randomBytes(18).toString('base64url'), until: nowMs() + SESSION_MS });
    const secure = (request.socket as { encrypted?: boolean }).encrypted === true ? '; Secure' : '';
    return reply.code(303).header('set-cookie', `${COOKIE}=${id}; Path=${CONSOLE_PREFIX}; HttpOnly; SameSite=Strict${secure}`).header('location', CONSOLE_PREFIX).send();
  });
  app.post('/logout', route, async (request, reply) => {
    const session = sessionOf(request);
    if (session) for (const [id, s] of sessions) if (s === session) sessions.delete(id);
    return reply.code(303).header('set-cookie', `${COOKIE}=; Path=${CONSOLE_PREFIX}; HttpOnly; SameSite=Strict; Max-Age=0`).header('location', `${CONSOLE_PREFIX}/login`).send();
  });

  // The overview: every job's state, the webhook backlog by account.
  app.get('/', route, guarded(async (_request, _session, op) => {
    const states = await op.jobs.states();
    const jobs = table('Jobs', ['Job', 'Last slot', 'Next slot', 'Due slots', 'Oldest due', 'Failed', 'Abandoned'], states.map((s) => [
      `<a href="${CONSOLE_PREFIX}/jobs?job=${enc(s.job)}">${h(s.job)}</a>`,
      s.lastSlot ? `${jst(s.lastSlot.slot)} <span class="${s.lastSlot.status === 'succeeded' ? 'ok' : 'bad'}">${h(s.lastSlot.status)}</span>` : 'never run',
      jst(s.nextSlot),
      String(s.dueSlots),
      jst(s.oldestDueSlot),
      s.failedSlots > 0 ? `<span class="bad">${s.failedSlots}</span>` : '0',
      s.abandonedSlots > 0 ? `<a class="bad" href="${CONSOLE_PREFIX}/jobs?status=abandoned">${s.abandonedSlots}</a>` : '0',
    ]));
    const accounts = await op.accounts.list();
    const rows: string[][] = [];
    for (const account of accounts.slice(0, 50)) {
      for (const endpoint of await op.webhooks.list(account.id)) {
        const c = endpoint.counts;
        rows.push([`<a href="${CONSOLE_PREFIX}/accounts/${enc(account.id)}/endpoints/${enc(endpoint.id)}">${h(endpoint.url)}</a>`, h(account.id), h(endpoint.status), String(c.waiting), c.failing > 0 ? `<span class="bad">${c.failing}</span>` : '0', c.givenUp > 0 ? `<span class="bad">${c.givenUp}</span>` : '0']);
      }
    }
    return { title: 'Overview', body: `<h2>Jobs</h2>${jobs}<h2>Webhooks</h2>${table('Webhook endpoints', ['Endpoint', 'Account', 'Status', 'Pending', 'Failing', 'Given up'], rows)}` };
  }));

  app.get('/jobs', route, guarded(async (request, session, op) => {
    const q = request.query as Record<string, unknown>;
    const job = typeof q.job === 'string' && q.job !== '' ? q.job : undefined;
    const status = typeof q.status === 'string' && q.status !== '' ? q.status : undefined;
    const slots = await op.jobs.slots({ ...(job ? { job } : {}), ...(status ? { status } : {}), limit: 100 });
    const rows = slots.map((s) => [
      h(s.job),
      jst(s.slot),
      `<span class="${s.status === 'succeeded' ? 'ok' : s.status === 'abandoned' || s.status === 'failed' ? 'bad' : ''}">${h(s.status)}</span>`,
      String(s.attempt),
      s.durationMs === null ? '—' : `${s.durationMs} ms`,
      h(s.counts ? JSON.stringify(s.counts) : ''),
      h((s.error ?? '').split('\n')[0] ?? ''),
      s.status === 'abandoned' || s.status === 'failed' ? action(session, `${CONSOLE_PREFIX}/jobs/run`, `Re-run ${s.job} at ${formatJst(s.slot)}`, { job: s.job, slot: s.slot.toISOString() }) : '',
    ]);
    const filter = `<p>Show: <a href="${CONSOLE_PREFIX}/jobs">every slot</a> · <a href="${CONSOLE_PREFIX}/jobs?status=abandoned">abandoned</a> · <a href="${CONSOLE_PREFIX}/jobs?status=failed">failed</a></p>`;
    return { title: `Job ledger${job ? `: ${job}` : ''}${status ? ` (${status})` : ''}`, body: `${filter}${table('Slots', ['Job', 'Slot', 'Status', 'Attempt', 'Duration', 'Counts', 'Error', 'Action'], rows)}${action(session, `${CONSOLE_PREFIX}/statements/run`, 'Run the nightly statements now')}` };
  }));
  app.post('/jobs/run', route, change(async (body, op) => {
    let slot: Date;
    try {
      slot = parseInstant(body.slot ?? '');
    } catch (error) {
      throw new KessaiError('invalid_param_key', { param: 'slot', message: (error as Error).message });
    }
    const outcome = await op.jobs.run(body.job ?? '', slot);
    return { back: `${CONSOLE_PREFIX}/jobs?job=${enc(outcome.job)}`, done: `${outcome.job} at ${formatJst(outcome.slot)}: ${outcome.status}` };
  }));
  app.post('/statements/run', route, change(async (_body, op) => {
    const outcomes = await op.jobs.runStatements();
    return { back: `${CONSOLE_PREFIX}/jobs`, done: outcomes.map((o) => `${o.job} at ${formatJst(o.slot)}: ${o.status}`).join('; ') };
  }));

  app.get('/accounts', route, guarded(async (_request, session, op) => {
    const accounts = await op.accounts.list();
    const create = form(
      session,
      `${CONSOLE_PREFIX}/accounts`,
      'Create an account',
      `${field('name', 'Merchant name', 'required maxlength="200"')}${field('id', 'Account id (optional, acct_…)', 'pattern="acct_[A-Za-z0-9_]+"')}${choice('termCycle', 'Term cycle', [['monthly', 'monthly'], ['semi_monthly', 'semi-monthly']])}${choice('live', 'Live mode', [['no', 'not enabled'], ['yes', 'enabled']])}`,
      'Create account',
    );
    return { title: 'Accounts', body: `${table('Accounts', ['Account', 'Name', 'Term cycle', 'Live', 'Created'], accounts.map((a) => [`<a href="${CONSOLE_PREFIX}/accounts/${enc(a.id)}">${h(a.id)}</a>`, h(a.name), h(a.termCycle), a.liveEnabled ? 'live' : 'test only', jst(a.createdAt)]))}${create}` };
  }));
  app.post('/accounts', route, change(async (body, op) => {
    const termCycle = body.termCycle === 'semi_monthly' ? 'semi_monthly' : 'monthly';
    const { account, keys } = await op.accounts.create({ name: body.name ?? '', liveEnabled: body.live === 'yes', termCycle, ...(body.id ? { id: body.id } : {}) });
    const rows = [
      ['test', 'secret', keys.test.secret],
      ['test', 'public', keys.test.public],
      ['live', 'secret', keys.live.secret],
      ['live', 'public', keys.live.public],
    ].map(([mode, kind, key]) => [h(mode!), h(kind!), `<code class="secret">${h(key!)}</code>`]);
    return {
      title: `Account ${account.id} created`,
      done: `account ${account.id} (${account.name}) created`,
      body: `<p>Keep the secret keys now: only their digests are stored, and this page is not shown again.</p>${table('API keys', ['Mode', 'Kind', 'Key'], rows)}<p><a href="${CONSOLE_PREFIX}/accounts/${enc(account.id)}">Account ${h(account.id)}</a></p>`,
    };
  }));
  app.get('/accounts/:account', route, guarded(async (request, session, op) => {
    const accountId = (request.params as Record<string, string>).account!;
    const livemode = livemodeOf(request);
    const [keys, endpoints, adjustments] = await Promise.all([op.accounts.keys(accountId), op.webhooks.list(accountId), op.adjustments.list(accountId, { livemode })]);
    const base = `${CONSOLE_PREFIX}/accounts/${enc(accountId)}`;
    const mode = modeName(livemode);
    const links = `<nav aria-label="Account"><p><a href="${base}/events?mode=${mode}">Recent events (${mode})</a> · <a href="${base}/settlement?mode=${mode}">Terms, statements and balances (${mode})</a> · <a href="${base}?mode=${livemode ? 'test' : 'live'}">Adjustments in ${livemode ? 'test' : 'live'} mode</a> · <a href="${base}/test_clocks">Test clocks</a></p></nav>`;
    const keyRows = keys.map((k) => [h(k.id), `${h(k.hint)}…`, h(k.kind), k.livemode ? 'live' : 'test', jst(k.createdAt), k.revokedAt ? `revoked ${jst(k.revokedAt)}` : action(session, `${base}/keys/revoke`, `Revoke key ${k.hint}…`, { key: k.id })]);
    const newKey = form(session, `${base}/keys`, 'Create a key', `${choice('kind', 'Kind', [['secret', 'secret'], ['public', 'public']])}${choice('mode', 'Mode', MODES)}`, 'Create key');
    const endpointRows = endpoints.map((e) => [`<a href="${base}/endpoints/${enc(e.id)}">${h(e.url)}</a>`, e.livemode ? 'live' : 'test', h(e.status), `delivered ${e.counts.delivered}, failing ${e.counts.failing}, waiting ${e.counts.waiting}, given up ${e.counts.givenUp}`]);
    const newEndpoint = form(session, `${base}/endpoints`, 'Add a webhook endpoint', `${field('url', 'Endpoint URL (https://…)', 'type="url" required')}${choice('mode', 'Mode', MODES)}${choice('apiVersion', 'Events of API version', [['', 'the account default'], ['v1', 'v1'], ['v2', 'v2']])}`, 'Add endpoint');
    const adjustmentRows = adjustments.map((a) => [h(a.id), jst(fromUnix(a.created)), h(a.tenant_id ?? a.owner), h(a.subject), `<span class="${a.amount < 0 ? 'bad' : 'ok'}">${a.amount.toLocaleString('en-US')} yen</span>`, h(a.term_id), h(a.reason)]);
    const newAdjustment = form(
      session,
      `${base}/adjustments`,
      `Book an adjustment (${mode} mode)`,
      `${field('amount', 'Amount in yen (positive: paid to the owner; negative: billed)', 'type="text" inputmode="numeric" pattern="-?[0-9]{1,12}" required')}${choice('subject', 'Subject', [['reallocation', 'reallocation'], ['other', 'other']])}${field('reason', 'Reason', 'required maxlength="500"')}${field('owner', 'Owner (merchant, platform or a tenant id)', 'value="merchant" required')}`,
      'Book adjustment',
      // A fresh request key per page: the form books once however often it is posted.
      { mode, request: randomUUID() },
    );
    return {
      title: `Account ${accountId}`,
      body: `${links}<h2>API keys</h2>${table('API keys', ['Id', 'Key', 'Kind', 'Mode', 'Created', 'State'], keyRows)}${newKey}<h2>Webhook endpoints</h2>${table('Webhook endpoints', ['URL', 'Mode', 'Status', 'Deliveries'], endpointRows)}${newEndpoint}<h2>Adjustments (${mode} mode)</h2>${table('Adjustments', ['Id', 'Booked', 'Owner', 'Subject', 'Amount', 'Term', 'Reason'], adjustmentRows)}${newAdjustment}`,
    };
  }));
  app.post('/accounts/:account/keys', route, change(async (body, op, request) => {
    const accountId = (request.params as Record<string, string>).account!;
    const { key, secret } = await op.accounts.createKey(accountId, { kind: body.kind === 'public' ? 'public' : 'secret', livemode: body.mode === 'live' });
    return { title: `New ${key.kind} key of ${accountId}`, done: `key ${key.hint}… created`, body: `<p>Keep the key now: only its digest is stored, and this page is not shown again.</p><p><code class="secret">${h(secret)}</code></p><p><a href="${CONSOLE_PREFIX}/accounts/${enc(accountId)}">Account ${h(accountId)}</a></p>` };
  }));
  app.post('/accounts/:account/endpoints', route, change(async (body, op, request) => {
    const accountId = (request.params as Record<string, string>).account!;
    const apiVersion = body.apiVersion === 'v1' || body.apiVersion === 'v2' ? body.apiVersion : null;
    const { endpoint, token } = await op.webhooks.add({ accountId, url: body.url ?? '', livemode: body.mode === 'live', apiVersion, eventTypes: null });
    return { title: `Webhook endpoint ${endpoint.id} added`, done: `endpoint ${endpoint.url} added`, body: `<p>Its token (sent with every event as X-Payjp-Webhook-Token) is shown once: keep it now.</p><p><code class="secret">${h(token)}</code></p><p><a href="${CONSOLE_PREFIX}/accounts/${enc(accountId)}">Account ${h(accountId)}</a></p>` };
  }));
  app.post('/accounts/:account/adjustments', route, change(async (body, op, request) => {
    const accountId = (request.params as Record<string, string>).account!;
    const livemode = body.mode === 'live';
    const adjustment = await op.adjustments.book(accountId, { livemode, amount: yenOf(body.amount, 'amount'), subject: body.subject ?? '', reason: body.reason ?? '', owner: body.owner?.trim() || 'merchant', requestKey: `console-${body.request ?? ''}` });
    return { back: `${CONSOLE_PREFIX}/accounts/${enc(accountId)}?mode=${modeName(livemode)}`, done: `adjustment ${adjustment.id} of ${adjustment.amount} yen booked into ${adjustment.term_id}` };
  }));
  app.get('/accounts/:account/events', route, guarded(async (request, _session, op) => {
    const accountId = (request.params as Record<string, string>).account!;
    const livemode = livemodeOf(request);
    const events = await op.accounts.events(accountId, { livemode });
    const rows = events.map((e) => [h(e.id), h(e.type), h(e.apiVersion), jst(e.createdAt), `<details><summary>JSON of ${h(e.id)}</summary><pre>${h(JSON.stringify(e.data, null, 2))}</pre></details>`]);
    return { title: `Recent events of ${accountId} (${modeName(livemode)})`, body: `<p><a href="${CONSOLE_PREFIX}/accounts/${enc(accountId)}">Account ${h(accountId)}</a> · <a href="?mode=${livemode ? 'test' : 'live'}">${livemode ? 'test' : 'live'} mode</a></p>${table('Events', ['Event', 'Type', 'API', 'Created', 'Object'], rows)}` };
  }));
  app.get('/accounts/:account/settlement', route, guarded(async (request, _session, op) => {
    const accountId = (request.params as Record<string, string>).account!;
    const livemode = livemodeOf(request);
    const mode = modeName(livemode);
    const { terms, statements, balances } = await op.accounts.settlement(accountId, { livemode });
    const base = `${CONSOLE_PREFIX}/accounts/${enc(accountId)}`;
    const yen = (amount: number) => `<span class="${amount < 0 ? 'bad' : ''}">${amount.toLocaleString('en-US')} yen</span>`;
    const termRows = terms.map((t) => [h(t.id), jst(fromUnix(t.start_at)), jst(fromUnix(t.end_at)), t.closed ? 'closed' : 'open', String(t.charge_count), String(t.refund_count), String(t.dispute_count)]);
    const statementRows = statements.map((st) => [h(st.id), h(st.type), h(st.tenant_id ?? 'merchant'), h(st.term?.id ?? '—'), yen(st.net), jst(fromUnix(st.created)), `<a href="${base}/statements/${enc(st.id)}.csv?mode=${mode}" download>Download ${h(st.id)} (CSV)</a>`]);
    const balanceRows = balances.map((b) => [h(b.id), h(b.tenant_id ?? b.owner), h(b.state), yen(b.net), b.closed ? `closed ${h(b.closed_date ?? '')}` : 'open', h(b.due_date ?? '—'), String(b.statements.length)]);
    return {
      title: `Settlement of ${accountId} (${mode})`,
      body: `<p><a href="${base}">Account ${h(accountId)}</a> · <a href="?mode=${livemode ? 'test' : 'live'}">${livemode ? 'test' : 'live'} mode</a></p><h2>Terms</h2>${table('Terms', ['Term', 'Start', 'End', 'State', 'Charges', 'Refunds', 'Disputes'], termRows)}<h2>Statements</h2>${table('Statements', ['Statement', 'Type', 'Owner', 'Term', 'Net', 'Created', 'Download'], statementRows)}<h2>Balances</h2>${table('Balances', ['Balance', 'Owner', 'State', 'Net', 'Closed', 'Due', 'Statements'], balanceRows)}`,
    };
  }));
  // The statement's CSV from the console's own origin (the page's CSP allows no other), as an attachment.
  app.get('/accounts/:account/statements/:file', route, async (request, reply) => {
    assertOperatorChannel(request);
    const session = sessionOf(request);
    if (!session) return reply.code(303).header('location', `${CONSOLE_PREFIX}/login`).send();
    const { account: accountId, file } = request.params as Record<string, string>;
    const statementId = file!.endsWith('.csv') ? file!.slice(0, -4) : file!;
    try {
      const csv = await options.operatorFor(session.who).accounts.statementCsv(accountId!, { livemode: livemodeOf(request), statementId });
      return reply.type('text/csv; charset=utf-8').header('content-disposition', `attachment; filename="${statementId.replace(/[^A-Za-z0-9_-]/g, '_')}.csv"`).header('cache-control', 'no-store').header('x-content-type-options', 'nosniff').send(csv);
    } catch (error) {
      const refusal = toV1Error(error);
      return send(reply, refusal.status, page('Not found', `<p class="error" role="alert">${h(refusal.code)}${refusal.param ? ` (${h(refusal.param)})` : ''}: ${h(refusal.message)}</p>`, session));
    }
  });
  app.get('/accounts/:account/test_clocks', route, guarded(async (request, session, op) => {
    const accountId = (request.params as Record<string, string>).account!;
    const clocks = await op.testClocks.list(accountId);
    const base = `${CONSOLE_PREFIX}/accounts/${enc(accountId)}/test_clocks`;
    const rows = clocks.map((c) => [h(c.id), h(c.name ?? '—'), `<span class="${c.status === 'ready' ? 'ok' : ''}">${h(c.status)}</span>`, jst(fromUnix(c.frozen_time)), jst(fromUnix(c.advancing_to)), jst(fromUnix(c.created))]);
    // One advance form per ready clock; its field's id names the clock, so every label is its own.
    const advances = clocks
      .filter((c) => c.status === 'ready')
      .map((c) => form(session, `${base}/${enc(c.id)}/advance`, `Advance ${c.id}${c.name ? ` (${c.name})` : ''}`, `<label for="to-${h(c.id)}">Advance ${h(c.id)} to (JST date or date-time, or an ISO instant)</label><input id="to-${h(c.id)}" name="to" required>`, `Advance ${c.id}`))
      .join('');
    // Deleting asks first: a link per clock not advancing, to a page that names what goes with it.
    const deletions = clocks.filter((c) => c.status !== 'advancing');
    const deletes = deletions.length === 0 ? '' : `<h2>Delete a test clock</h2><ul>${deletions.map((c) => `<li><a href="${base}/${enc(c.id)}/delete">Delete ${h(c.id)}${c.name ? ` (${h(c.name)})` : ''}</a></li>`).join('')}</ul>`;
    const create = form(session, base, 'Create a test clock', `${field('frozen_time', 'Frozen time (JST date or date-time, or an ISO instant)', 'required')}${field('name', 'Name (optional)', `maxlength="${MAX_TEXT_LENGTH}"`)}`, 'Create test clock');
    return {
      title: `Test clocks of ${accountId}`,
      body: `<p><a href="${CONSOLE_PREFIX}/accounts/${enc(accountId)}">Account ${h(accountId)}</a> · <a href="${base}">Reload</a> (an advance runs after its answer: the clock is advancing until it is ready)</p>${table('Test clocks', ['Clock', 'Name', 'Status', 'Frozen time', 'Advancing to', 'Created'], rows)}${advances}${deletes}${create}`,
    };
  }));
  // The confirmation: the clock's id typed back, as the form's one field, before anything is deleted.
  app.get('/accounts/:account/test_clocks/:clock/delete', route, guarded(async (request, session, op) => {
    const { account: accountId, clock: clockId } = request.params as Record<string, string>;
    const clock = (await op.testClocks.list(accountId!)).find((c) => c.id === clockId);
    if (!clock) throw new KessaiError('not_found', { param: 'id', message: `No such test clock: ${clockId}` });
    const base = `${CONSOLE_PREFIX}/accounts/${enc(accountId!)}/test_clocks`;
    const confirm = field('confirm', `Type ${clock.id} to confirm`, 'required autocomplete="off"');
    return {
      title: `Delete test clock ${clock.id}`,
      body: `<p><a href="${base}">Back to the test clocks (nothing deleted)</a></p><p>Deleting ${h(clock.id)}${clock.name ? ` (${h(clock.name)})` : ''}, ${h(clock.status)} at ${jst(fromUnix(clock.frozen_time))}, removes its customers and everything on them — cards, subscriptions, charges, refunds, disputes, payment flows, checkout sessions, their events and webhook deliveries — and the clock's terms, statements and balances. It cannot be undone.</p>${form(session, `${base}/${enc(clock.id)}/delete`, `Delete ${clock.id}`, confirm, `Delete ${clock.id} and its objects`)}`,
    };
  }));
  app.post('/accounts/:account/test_clocks/:clock/delete', route, change(async (body, op, request) => {
    const { account: accountId, clock: clockId } = request.params as Record<string, string>;
    if ((body.confirm ?? '').trim() !== clockId) throw new KessaiError('invalid_param_key', { param: 'confirm', message: `type the clock's id, ${clockId}, to delete it` });
    await op.testClocks.delete(accountId!, clockId!);
    return { back: `${CONSOLE_PREFIX}/accounts/${enc(accountId!)}/test_clocks`, done: `test clock ${clockId} deleted with its objects` };
  }));
  app.post('/accounts/:account/test_clocks', route, change(async (body, op, request) => {
    const accountId = (request.params as Record<string, string>).account!;
    const clock = await op.testClocks.create(accountId, { frozenTime: consoleInstant(body.frozen_time, 'frozen_time'), ...(body.name ? { name: body.name } : {}) });
    return { back: `${CONSOLE_PREFIX}/accounts/${enc(accountId)}/test_clocks`, done: `test clock ${clock.id} created at ${formatJst(fromUnix(clock.frozen_time)!)}` };
  }));
  app.post('/accounts/:account/test_clocks/:clock/advance', route, change(async (body, op, request) => {
    const { account: accountId, clock: clockId } = request.params as Record<string, string>;
    const clock = await op.testClocks.advance(accountId!, clockId!, consoleInstant(body.to, 'to'));
    return { back: `${CONSOLE_PREFIX}/accounts/${enc(accountId!)}/test_clocks`, done: `test clock ${clock.id} advancing to ${formatJst(fromUnix(clock.advancing_to)!)}` };
  }));
  app.post('/accounts/:account/keys/revoke', route, change(async (body, op, request) => {
    const accountId = (request.params as Record<string, string>).account!;
    const key = await op.accounts.revokeKey(accountId, body.key ?? '');
    return { back: `${CONSOLE_PREFIX}/accounts/${enc(accountId)}`, done: `key ${key.hint}… revoked` };
  }));
  app.get('/accounts/:account/endpoints/:endpoint', route, guarded(async (request, session, op) => {
    const { account: accountId, endpoint: endpointId } = request.params as Record<string, string>;
    const deliveries = await op.webhooks.deliveries(accountId!, endpointId!, { limit: 100 });
    const base = `${CONSOLE_PREFIX}/accounts/${enc(accountId!)}/endpoints/${enc(endpointId!)}`;
    const rows = deliveries.map((d) => [
      h(d.eventId),
      h(d.eventType),
      `<span class="${d.status === 'delivered' ? 'ok' : d.status === 'failed' ? 'bad' : ''}">${d.status === 'failed' ? 'given up' : h(d.status)}</span>`,
      String(d.attempts),
      d.lastStatus === null ? h(d.lastError ?? '—') : `HTTP ${d.lastStatus}`,
      jst(d.deliveredAt),
      String(d.resends),
      // A fresh request key per page: the button re-sends once however often the form is posted.
      d.status === 'failed' ? action(session, `${base}/resend`, `Re-send ${d.eventId}`, { event: d.eventId, request: randomUUID() }) : '',
    ]);
    const all = deliveries.some((d) => d.status === 'failed') ? action(session, `${base}/resend`, 'Re-send every given-up delivery', { request: randomUUID() }) : '';
    return { title: `Deliveries to ${endpointId}`, body: `<p><a href="${CONSOLE_PREFIX}/accounts/${enc(accountId!)}">Account ${h(accountId!)}</a></p>${table('Deliveries', ['Event', 'Type', 'State', 'Attempts', 'Last answer', 'Delivered', 'Re-sends', 'Action'], rows)}${all}` };
  }));
  app.post('/accounts/:account/endpoints/:endpoint/resend', route, change(async (body, op, request) => {
    const { account: accountId, endpoint: endpointId } = request.params as Record<string, string>;
    const result = await op.webhooks.resend(accountId!, endpointId!, { requestKey: `console-${body.request ?? ''}`, ...(body.event ? { eventId: body.event } : {}) });
    return { back: `${CONSOLE_PREFIX}/accounts/${enc(accountId!)}/endpoints/${enc(endpointId!)}`, done: `${result.resent} delivery(ies) queued for a re-send` };
  }));
}
