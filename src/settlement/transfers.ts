/**
 * Transfers and tenant transfers (`tr_`, `tentr_`; the `payjp` SDK's `transfers` and
 * `tenant_transfers`, official-sdks.md §4) after the settlement overhaul of 2024-06-01 (v1 §9:
 * `term_id`, `term`, `balance_id` "follow the settlement object overhaul"): payouts are balances
 * (`ba_`, state `transfer`) made of statements, and no transfer object is created any more; the
 * real service keeps the transfer routes for the payouts made before the overhaul. kessai's book
 * has only post-overhaul settlement, so it answers those routes as the real service answers an
 * account opened after 2024-06-01: every list is empty, every id is unknown (`invalid_id`, 404).
 * The parameters are still checked, so a request that would be refused by the real service is
 * refused here too. Decision recorded in
 * docs/decisions/api-conventions.md, "v1 routes: tokens' 3-D Secure, download URLs, transfers, …".
 */
import type { Caller } from '../accounts/accounts';
import { reject } from '../domain/errors';
import type { Context } from '../engine/context';
import type { Page } from '../operations/pagination';

/** The transfer statuses of the pre-overhaul API (list filter `status`). */
export const TRANSFER_STATUSES = ['pending', 'paid', 'failed', 'stop', 'carried_over', 'recombination'] as const;
export type TransferStatus = (typeof TRANSFER_STATUSES)[number];

export type TransferKind = 'transfer' | 'tenant_transfer';

export interface ListTransfersCommand {
  readonly kind: TransferKind;
  readonly page: Page;
  readonly status: TransferStatus | undefined;
  /** Scheduled-date window. */
  readonly sinceScheduledDate: Date | undefined;
  readonly untilScheduledDate: Date | undefined;
  /** tenant_transfers only. */
  readonly tenant: string | undefined;
  readonly transfer: string | undefined;
}

export interface TransferCommand {
  readonly kind: TransferKind;
  readonly id: string;
}

/** A transfer object (never made: see the file comment). */
export type TransferObject = { readonly id: string; readonly object: TransferKind };

/** No transfer exists in a post-overhaul book. */
export async function listTransfers(_ctx: Context, _caller: Caller, _command: ListTransfersCommand): Promise<TransferObject[]> {
  return [];
}

function unknownTransfer(command: TransferCommand): never {
  return reject('invalid_id', 'id', `No such ${command.kind === 'transfer' ? 'transfer' : 'tenant transfer'}: ${command.id}`);
}

export async function retrieveTransfer(_ctx: Context, _caller: Caller, command: TransferCommand): Promise<TransferObject> {
  return unknownTransfer(command);
}

/** The charges of a transfer: the transfer must exist first. */
export async function transferCharges(_ctx: Context, _caller: Caller, command: TransferCommand & { readonly page: Page; readonly customer: string | undefined }): Promise<never> {
  return unknownTransfer(command);
}

/** A tenant transfer's statement URL: the tenant transfer must exist first. */
export async function tenantTransferStatementUrl(_ctx: Context, _caller: Caller, command: TransferCommand & { readonly platformer: boolean }): Promise<never> {
  return unknownTransfer(command);
}
