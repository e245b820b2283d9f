/** Settings that come from the environment: secrets never travel on the command line. */
import type { EngineConfig } from '../engine/context';

export function environmentConfig(): Partial<EngineConfig> {
  return {
    ...(process.env.KESSAI_STATEMENT_URL_SECRET ? { statementUrlSecret: process.env.KESSAI_STATEMENT_URL_SECRET } : {}),
    ...(process.env.KESSAI_STATEMENT_DOWNLOAD_BASE_URL ? { statementDownloadBaseUrl: process.env.KESSAI_STATEMENT_DOWNLOAD_BASE_URL } : {}),
    ...(process.env.KESSAI_TENANT_APPLICATION_BASE_URL ? { tenantApplicationBaseUrl: process.env.KESSAI_TENANT_APPLICATION_BASE_URL } : {}),
  };
}
