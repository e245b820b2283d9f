/**
 * The buyer's step of v1 3-D Secure in the redirect workflow (v1 §4.3 step 2), served by kessai as
 * the card issuer's screen: the merchant sends the buyer to
 *
 *   GET /v1/tds/{id}/start?publickey={public key}&back_url={the merchant's return URL}
 *
 * where `{id}` is a charge created with `three_d_secure=true`, a token created with
 * `three_d_secure=true`, or a 3-D Secure request (`tdsr_`). The page is the simulated issuer's
 * challenge (the same renderer as the v2 challenge, src/checkout/hosted-page.ts): *Authenticate*
 * runs the buyer's operation (`charges.tds_authenticate`, `tokens.tds_authenticate`,
 * `three_d_secure_requests.authenticate`), whose answer is the test card's; *Cancel* abandons
 * (nothing recorded, the status stays `unverified`). Either way the buyer goes back to `back_url`
 * exactly as given, "with no extra parameters added": the merchant kept the id in its session and
 * now retrieves it and calls `tds_finish`. A resource with nothing left to authenticate sends the
 * buyer straight back. Refusals are pages, never JSON.
 */
import type { FastifyInstance, FastifyReply } from 'fastify';
import { authenticate, type Caller } from '../accounts/accounts';
import type { ChargeObject } from '../charges/charges';
import { renderChallengePage, renderRefusalPage } from '../checkout/hosted-page';
import type { TokenObject } from '../customers/tokens';
import { KessaiError } from '../domain/errors';
import { ID_PREFIX } from '../domain/ids';
import type { Context } from '../engine/context';
import { runOperation } from './operations';
import type { ThreeDSecureRequestObject } from '../three-d-secure-requests/three-d-secure-requests';
import { httpUrl, sendPage, text, type Query } from './hosted-checkout';

/** The start address of the redirect workflow (the page posts the buyer's answer back to it). */
export const V1_THREE_D_SECURE_START_PATH = '/v1/tds/:id/start';
export const v1ThreeDSecureStartPath = (id: string): string => `/v1/tds/${encodeURIComponent(id)}/start`;

/** What the challenge shows of a resource, and whether it still waits for the buyer. */
interface Awaiting {
  readonly waiting: boolean;
  readonly livemode: boolean;
  readonly amount: number | null;
  readonly cardLast4: string | null;
}

/** A resource the buyer authenticates, by its id prefix. */
interface V1ThreeDSecureResource {
  /** The buyer's operation (allowed with the public key). */
  readonly authenticate: string;
  /** Opens the buyer's step when the page is shown (a 3-D Secure request is started), then reads it. */
  readonly open: (ctx: Context, caller: Caller, id: string) => Promise<Awaiting>;
}

/**
 * The page reads the resource with the key's account behind it: the public key proves the account
 * and mode, the id names one of its resources, and the page shows only the amount and the last
 * four digits (what the issuer's screen shows a buyer).
 */
const asAccount = (caller: Caller): Caller => ({ ...caller, kind: 'secret' });

const RESOURCES: Readonly<Record<string, V1ThreeDSecureResource>> = {
  [ID_PREFIX.charge]: {
    authenticate: 'charges.tds_authenticate',
    open: async (ctx, caller, id) => {
      const charge = (await runOperation(ctx, asAccount(caller), 'charges.retrieve', { id })) as ChargeObject;
      // Pending: not finished (paid or failed) and not yet authenticated (v1 §3.1).
      const waiting = charge.three_d_secure_status === 'unverified' && !charge.paid && charge.failure_code === null;
      return { waiting, livemode: charge.livemode, amount: charge.amount, cardLast4: charge.card?.last4 ?? null };
    },
  },
  [ID_PREFIX.token]: {
    authenticate: 'tokens.tds_authenticate',
    open: async (ctx, caller, id) => {
      const token = (await runOperation(ctx, asAccount(caller), 'tokens.retrieve', { id })) as TokenObject;
      return { waiting: token.card.three_d_secure_status === 'unverified', livemode: token.livemode, amount: null, cardLast4: token.card.last4 };
    },
  },
  [ID_PREFIX.threeDSecureRequest]: {
    authenticate: 'three_d_secure_requests.authenticate',
    open: async (ctx, caller, id) => {
      let request = (await runOperation(ctx, asAccount(caller), 'three_d_secure_requests.retrieve', { id })) as ThreeDSecureRequestObject;
      // Showing the issuer's screen is the request's start (`created` → `in_progress`).
      if (request.state === 'created') request = (await runOperation(ctx, caller, 'three_d_secure_requests.start', { id })) as ThreeDSecureRequestObject;
      return { waiting: request.state === 'in_progress', livemode: request.livemode, amount: null, cardLast4: null };
    },
  },
};

function resourceOf(id: string): V1ThreeDSecureResource {
  const prefix = Object.keys(RESOURCES).find((candidate) => id.startsWith(candidate));
  if (prefix === undefined) throw new KessaiError('invalid_id', { param: 'id', message: `No charge, token or 3-D Secure request has the id ${id}.` });
  return RESOURCES[prefix]!;
}

/**
 * The hand-over of the start address: the public key's account and mode, and the merchant's
 * return URL (http or https; https in live mode, where a buyer's card is real).
 */
async function handedOver(ctx: Context, fields: Query): Promise<{ caller: Caller; backUrl: URL }> {
  const backUrl = httpUrl(text(fields, 'back_url'));
  if (backUrl === null) throw new KessaiError('invalid_param_key', { param: 'back_url', message: 'back_url must be an http or https URL' });
  const caller = await authenticate(ctx, text(fields, 'publickey'));
  if (caller.kind !== 'public') throw new KessaiError('invalid_api_key', { message: 'A browser page takes the public key, never the secret key.' });
  if (caller.livemode && backUrl.protocol !== 'https:') throw new KessaiError('invalid_param_key', { param: 'back_url', message: 'back_url must be an https URL in live mode' });
  return { caller, backUrl };
}

/**
 * A refusal as a page. Once the key and the resource are known to match, the page links back to
 * the merchant (a lapsed window, a resource the merchant must create again).
 */
function refusal(reply: FastifyReply, error: unknown, backUrl: URL | null): FastifyReply {
  if (!(error instanceof KessaiError)) throw error;
  return sendPage(reply, error.status, renderRefusalPage('お手続きできません / This cannot be done', error.message, backUrl?.toString() ?? null), backUrl === null ? [] : [backUrl.origin]);
}

export function registerV1ThreeDSecurePage(app: FastifyInstance, ctx: Context): void {
  const publicRoute = { config: { public: true, page: true } } as const;
  // Back to the merchant exactly as the merchant wrote it (v1 §4.3: no extra parameters).
  const back = (reply: FastifyReply, backUrl: URL) => reply.redirect(backUrl.toString(), 303);

  app.get(V1_THREE_D_SECURE_START_PATH, publicRoute, async (request, reply) => {
    const { id } = request.params as { id: string };
    const fields = request.query as Query;
    let handed: Awaited<ReturnType<typeof handedOver>> | null = null;
    try {
      handed = await handedOver(ctx, fields);
      const resource = resourceOf(id);
      const awaiting = await resource.open(ctx, handed.caller, id);
      // Nothing to authenticate (done already, finished, or never asked): the merchant asks the API.
      if (!awaiting.waiting) return back(reply, handed.backUrl);
      const page = renderChallengePage({
        action: v1ThreeDSecureStartPath(id),
        fields: { publickey: text(fields, 'publickey'), back_url: text(fields, 'back_url') },
        livemode: awaiting.livemode,
        amount: awaiting.amount,
        cardLast4: awaiting.cardLast4,
        returnHost: handed.backUrl.host,
      });
      return sendPage(reply, 200, page, [handed.backUrl.origin]);
    } catch (error) {
      return refusal(reply, error, knownBack(error, handed));
    }
  });

  app.post(V1_THREE_D_SECURE_START_PATH, publicRoute, async (request, reply) => {
    const { id } = request.params as { id: string };
    const fields = request.body as Query;
    let handed: Awaited<ReturnType<typeof handedOver>> | null = null;
    try {
      handed = await handedOver(ctx, fields);
      const resource = resourceOf(id);
      if (text(fields, 'decision') === 'authenticate') {
        try {
          await runOperation(ctx, handed.caller, resource.authenticate, { id });
        } catch (error) {
          // A second submit of the same page (the first recorded the answer): back as the first went.
          if (!(error instanceof KessaiError && error.code === 'invalid_three_d_secure_state')) throw error;
        }
      }
      return back(reply, handed.backUrl);
    } catch (error) {
      return refusal(reply, error, knownBack(error, handed));
    }
  });
}

/** The merchant's return URL may be offered when the key matched and the resource is the account's. */
function knownBack(error: unknown, handed: { readonly backUrl: URL } | null): URL | null {
  if (handed === null || !(error instanceof KessaiError) || error.code === 'invalid_id') return null;
  return handed.backUrl;
}
