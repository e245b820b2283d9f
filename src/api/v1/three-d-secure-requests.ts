/**
 * The v1 codec of 3-D Secure requests (POST/GET /v1/three_d_secure_requests, GET
 * /v1/three_d_secure_requests/{id}; the SDK's `three_d_secure_requests.create|list|retrieve`):
 * create takes `resource_id` (required, a customer's card) and `tenant_id`; the list takes
 * pagination plus `resource_id` and `tenant_id`. The buyer's steps `three_d_secure_requests.start`
 * and `.authenticate` have no API route: the buyer runs them on kessai's issuer page
 * (src/api/v1-three-d-secure-page.ts); scenarios run them directly.
 */
import { defineCommandOperation } from '../../operations/define';
import { listObject, PAGINATION_PARAMS, readPage } from '../../operations/pagination';
import { optionalString, readParams, requireString } from '../../operations/params';
import {
  authenticateThreeDSecureRequest,
  createThreeDSecureRequest,
  listThreeDSecureRequests,
  renderThreeDSecureRequest,
  retrieveThreeDSecureRequest,
  startThreeDSecureRequest,
  THREE_D_SECURE_REQUESTS_URL,
  type CreateThreeDSecureRequestCommand,
  type ListThreeDSecureRequestsCommand,
} from '../../three-d-secure-requests/three-d-secure-requests';
import { decodeId } from './codec';

export function decodeCreateThreeDSecureRequest(input: unknown): CreateThreeDSecureRequestCommand {
  const params = readParams(input, ['resource_id', 'tenant_id']);
  return { resourceId: requireString(params, 'resource_id'), tenantId: optionalString(params, 'tenant_id') };
}

export function decodeListThreeDSecureRequests(input: unknown): ListThreeDSecureRequestsCommand {
  const params = readParams(input, [...PAGINATION_PARAMS, 'resource_id', 'tenant_id']);
  return {
    page: readPage(params),
    resourceId: optionalString(params, 'resource_id', { code: 'invalid_querystring' }),
    tenantId: optionalString(params, 'tenant_id', { code: 'invalid_querystring' }),
  };
}

export const THREE_D_SECURE_REQUEST_OPERATIONS = [
  defineCommandOperation('three_d_secure_requests.create', { decode: decodeCreateThreeDSecureRequest, execute: createThreeDSecureRequest, encode: renderThreeDSecureRequest }),
  defineCommandOperation('three_d_secure_requests.retrieve', { decode: decodeId, execute: retrieveThreeDSecureRequest, encode: renderThreeDSecureRequest }),
  defineCommandOperation('three_d_secure_requests.list', {
    decode: decodeListThreeDSecureRequests,
    execute: listThreeDSecureRequests,
    encode: (views, command) => listObject(views.map(renderThreeDSecureRequest), command.page, THREE_D_SECURE_REQUESTS_URL),
  }),
  // The buyer's steps, run with the public key as the client library would.
  defineCommandOperation('three_d_secure_requests.start', { decode: decodeId, execute: startThreeDSecureRequest, encode: renderThreeDSecureRequest }, { keys: 'secret_or_public' }),
  defineCommandOperation('three_d_secure_requests.authenticate', { decode: decodeId, execute: authenticateThreeDSecureRequest, encode: renderThreeDSecureRequest }, { keys: 'secret_or_public' }),
];
