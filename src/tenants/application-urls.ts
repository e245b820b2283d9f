/**
 * `tenants.application_urls` (platform mode; the `payjp` SDK's `tenants.applicationUrls`,
 * official-sdks.md §4): a URL of the tenant's onboarding (application) page, which kessai serves
 * itself, expiring like a statement download URL: 1 hour after issue, or when a newer URL is issued
 * for the same tenant; then the page is a not-found. Issued and checked by the one URL mechanism
 * of statement-urls.ts (kind `tenant_application`).
 */
import type { Caller } from '../accounts/accounts';
import { escapeHtml } from '../domain/html';
import type { Context } from '../engine/context';
import { STATEMENT_URL_TTL_MS } from '../domain/limits';
import { issueUrl, payloadOfToken, type IssuedUrl } from '../settlement/statement-urls';
import { findTenant, type TenantRow } from './tenants';

/** Decision (docs/decisions/api-conventions.md, "v1 routes: …"): the application URL lives as long as a statement URL. */
export const TENANT_APPLICATION_URL_TTL_MS = STATEMENT_URL_TTL_MS;
export const DEFAULT_TENANT_APPLICATION_BASE = 'https://kessai.invalid/v1/tenant_application';

export interface TenantApplicationUrlCommand {
  readonly id: string;
}

export async function issueTenantApplicationUrl(ctx: Context, caller: Caller, command: TenantApplicationUrlCommand): Promise<IssuedUrl> {
  const base = ctx.config.tenantApplicationBaseUrl ?? DEFAULT_TENANT_APPLICATION_BASE;
  return issueUrl(ctx, caller, { kind: 'tenant_application', id: command.id, platformer: false }, { ttlMs: TENANT_APPLICATION_URL_TTL_MS, base, exists: (trx) => findTenant(trx, caller, command.id, 'id') });
}

/**
 * The application page: who the tenant is and what kessai does with the application. kessai has
 * no human review, so the page confirms the tenant instead of collecting documents.
 */
export function renderTenantApplicationPage(tenant: TenantRow, expires: Date): string {
  const name = escapeHtml(tenant.name ?? tenant.tenant_id);
  return [
    '<!doctype html>',
    '<html lang="ja"><head><meta charset="utf-8"><meta name="robots" content="noindex">',
    `<title>審査申請 — ${name}</title></head><body>`,
    `<h1>審査申請 / Application: ${name}</h1>`,
    '<dl>',
    `<dt>Tenant</dt><dd id="tenant">${escapeHtml(tenant.tenant_id)}</dd>`,
    `<dt>Mode</dt><dd id="mode">${tenant.livemode ? 'live' : 'test'}</dd>`,
    `<dt>Platform fee rate</dt><dd id="platform_fee_rate">${escapeHtml(tenant.platform_fee_rate)}%</dd>`,
    `<dt>This link expires</dt><dd id="expires">${expires.toISOString()}</dd>`,
    '</dl>',
    '<p>kessai reviews no documents: the tenant can take charges as soon as it is created.</p>',
    '</body></html>',
    '',
  ].join('\n');
}

/** The page of a URL: checks the token (kind `tenant_application`) and renders the page. */
export async function tenantApplicationPage(ctx: Pick<Context, 'db' | 'clock' | 'config'>, token: string): Promise<string> {
  const payload = await payloadOfToken(ctx, token, 'tenant_application');
  const tenant = await findTenant(ctx.db, { accountId: payload.a, livemode: payload.l }, payload.s, 'token');
  return renderTenantApplicationPage(tenant, new Date(payload.e));
}
