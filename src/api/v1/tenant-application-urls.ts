/**
 * The v1 codec of `tenants.application_urls` (POST /v1/tenants/{id}/application_urls, the SDK's
 * `tenants.applicationUrls(id)`, no parameters) → the `application_url` object: `object`, `url`,
 * `expires` (UNIX seconds), shaped like the statement URL (v1 §2.7).
 */
import { toUnixSeconds } from '../../domain/time';
import { defineCommandOperation } from '../../operations/define';
import { issueTenantApplicationUrl } from '../../tenants/application-urls';
import { decodeId } from './codec';

export const TENANT_APPLICATION_URL_OPERATIONS = [
  defineCommandOperation('tenants.application_urls', {
    decode: decodeId,
    execute: issueTenantApplicationUrl,
    encode: (issued) => ({ object: 'application_url', url: issued.url, expires: toUnixSeconds(issued.expires) }),
  }),
];
