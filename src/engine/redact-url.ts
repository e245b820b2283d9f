/**
 * A URL as a log line may carry it: every credential a client may put in a URL, by mistake or by
 * design, replaced with `[redacted]`. The logger applies it to every `url` field (logger.ts), so
 * the access log and any other line naming a URL go through this one function.
 *
 * Redacted: the value of every `card[…]` parameter (number, CVC, expiry, name: a card as the v1
 * form writes it) and of every parameter named as a credential (`token`, `key`, `publickey`,
 * `client_secret`, `*_client_secret`, `secret`, `password`); any path segment, parameter name or
 * value shaped like a credential wherever it sits — an API key (`sk_`/`pk_` test or live), a
 * webhook token (`whook_`), a card token (`tok_`), a client secret (`…_secret_…`) — or like a card
 * number (13 to 19 digits, spaces or hyphens between them allowed). Percent-escapes are decoded
 * before looking, so an escaped underscore hides nothing.
 */
import { ID_PREFIX } from '../domain/ids';

const REDACTED = '[redacted]';

/** Prefixes of credentials (ID_PREFIX's keys and tokens) and the client secret's infix. */
const CREDENTIAL_MARKS = [ID_PREFIX.secretKeyTest, ID_PREFIX.secretKeyLive, ID_PREFIX.publicKeyTest, ID_PREFIX.publicKeyLive, ID_PREFIX.webhookToken, ID_PREFIX.token];
const CREDENTIAL_SHAPE = new RegExp(`(?:^|[^A-Za-z0-9])(?:${CREDENTIAL_MARKS.join('|')})[A-Za-z0-9]|_secret_[A-Za-z0-9]`);
/** A card number: 13 to 19 digits, not inside a longer word (an id's hex). */
const CARD_NUMBER_SHAPE = /(?<![A-Za-z0-9])\d(?:[ -]?\d){12,18}(?![A-Za-z0-9])/;
/** Parameters whose value is a credential whatever it looks like. */
const CREDENTIAL_PARAM = /^(?:card\[.*|token|key|publickey|secret|password|client_secret|[a-z_]+_client_secret)$/i;

function decoded(text: string): string {
  try {
    return decodeURIComponent(text.replaceAll('+', ' '));
  } catch {
    return text;
  }
}

function secretShaped(text: string): boolean {
  const plain = decoded(text);
  return CREDENTIAL_SHAPE.test(plain) || CARD_NUMBER_SHAPE.test(plain);
}

function redactParameter(part: string): string {
  const equals = part.indexOf('=');
  const name = equals === -1 ? part : part.slice(0, equals);
  if (secretShaped(name)) return REDACTED;
  if (equals === -1) return part;
  const value = part.slice(equals + 1);
  return CREDENTIAL_PARAM.test(decoded(name)) || secretShaped(value) ? `${name}=${REDACTED}` : part;
}

export function redactUrl(url: string): string {
  const mark = url.indexOf('?');
  const path = mark === -1 ? url : url.slice(0, mark);
  const redactedPath = path
    .split('/')
    .map((segment) => (secretShaped(segment) ? REDACTED : segment))
    .join('/');
  if (mark === -1) return redactedPath;
  return `${redactedPath}?${url
    .slice(mark + 1)
    .split('&')
    .map(redactParameter)
    .join('&')}`;
}
