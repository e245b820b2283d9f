/** Settings that come from the environment: secrets never travel on the command line. */
import { checkoutPageBaseOf } from '../checkout/checkout-sessions';
import type { EngineConfig } from '../engine/context';

export function environmentConfig(): Partial<EngineConfig> {
  return {
    ...(process.env.KESSAI_STATEMENT_URL_SECRET ? { statementUrlSecret: process.env.KESSAI_STATEMENT_URL_SECRET } : {}),
    ...(process.env.KESSAI_STATEMENT_DOWNLOAD_BASE_URL ? { statementDownloadBaseUrl: process.env.KESSAI_STATEMENT_DOWNLOAD_BASE_URL } : {}),
    // The address buyers reach `kessai serve` at (behind a proxy, say): hosted checkout page URLs.
    ...(process.env.KESSAI_PUBLIC_URL ? { checkoutPageBaseUrl: checkoutPageBaseOf(process.env.KESSAI_PUBLIC_URL) } : {}),
    ...(process.env.KESSAI_TENANT_APPLICATION_BASE_URL ? { tenantApplicationBaseUrl: process.env.KESSAI_TENANT_APPLICATION_BASE_URL } : {}),
  };
}
