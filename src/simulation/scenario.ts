/**
 * Scenario files of `kessai simulate`: reading, checking and flattening them into one ordered list
 * of steps (operation calls at instants). The shape is the JSON Schema in
 * scripts/scenarios/scenario.schema.json; this module adds what a schema cannot say (operations
 * that exist, instants inside the range, labels defined before they are used) and names the entry
 * at fault in every error.
 */
import { readFileSync } from 'node:fs';
import { Ajv, type ErrorObject } from 'ajv';
import { seededWords } from '../domain/ids';
import { formatJst, parseInstant } from '../domain/time';
import { TEST_CARDS } from '../processor/test-cards';
import { packagePath } from '../package-root';

/** The committed schema is the single definition of the file format; it is read, not copied. */
export const SCENARIO_SCHEMA_PATH = packagePath('scripts/scenarios/scenario.schema.json');

export type JsonObject = Record<string, unknown>;

export interface ScenarioAccount {
  readonly id?: string;
  readonly name?: string;
  readonly live_enabled?: boolean;
  readonly term_cycle?: 'monthly' | 'semi_monthly';
  readonly fee_rates?: Readonly<Record<string, string>>;
  readonly options?: Readonly<Record<string, string | number | boolean | null>>;
  /** The account's own paid plan of the service (test mode), billed monthly into `service_fee` statements. */
  readonly service_plan?: ScenarioServicePlan;
  /**
   * In a what-if overlay, for an account of the baseline: the fee rates, options and service plan
   * take effect from this date or instant (JST unless it has a zone) instead of from the start.
   */
  readonly from?: string;
}

/** A paid plan of the service: `proplan` or `plan_fee`, at a monthly fee in yen (0: no paid plan). */
export interface ScenarioServicePlan {
  readonly subject: 'proplan' | 'plan_fee';
  readonly monthly_fee: number;
}

/** A service plan setting of a scenario, in force from an instant (servicePlanSettings). */
export interface ServicePlanChange {
  readonly entry: string;
  readonly account: string;
  readonly from: Date | undefined;
  readonly plan: ScenarioServicePlan;
}

/** An overlay's account settings that take effect from a date (made by overlayScenario, not written in files). */
export interface AccountChange {
  readonly entry: string;
  readonly account: string;
  readonly from: string;
  readonly fee_rates?: Readonly<Record<string, string>>;
  readonly options?: Readonly<Record<string, string | number | boolean | null>>;
  readonly service_plan?: ScenarioServicePlan;
}

/** The simulation's own step that changes an account's settings (an AccountChange); not an API operation. */
export const ACCOUNT_SETTINGS_OP = 'simulation.account_settings';

/**
 * A timeline entry that books an operator adjustment (src/settlement/adjustments.ts): params
 * `amount`, `subject` (`reallocation` or `other`), `reason`, optional `owner`. Not an API operation.
 */
export const ADJUSTMENT_OP = 'adjustments.add';

interface Placed {
  readonly ref?: string;
  readonly account?: string;
  readonly livemode?: boolean;
  readonly at?: string;
}

export interface ScenarioSetup extends Placed {
  readonly params: JsonObject;
}

export interface ScenarioCustomer extends Placed {
  readonly card?: JsonObject;
  readonly params?: JsonObject;
}

export interface ScenarioEntry extends Placed {
  readonly at: string;
  readonly op: string;
  readonly params?: JsonObject;
  readonly for_each?: ForEach;
}

/** Runs an entry once per object of a list operation: `$item` in params is that object. */
export interface ForEach {
  readonly op: string;
  readonly params?: JsonObject;
}

/** The label a for_each entry binds to each listed object. */
export const ITEM_LABEL = 'item';

export interface SubscribersGenerator {
  readonly generate: 'subscribers';
  readonly ref?: string;
  readonly count: number;
  readonly plan: string;
  readonly from: string;
  readonly to: string;
  readonly account?: string;
  readonly params?: JsonObject;
  readonly card_mix?: { readonly declined?: number; readonly overseas?: number; readonly debit?: number };
}

/** A webhook endpoint of the simulation; `fail` makes it fail always, for its first N attempts, or time out. */
export interface ScenarioWebhook {
  readonly account?: string;
  readonly livemode?: boolean;
  readonly url: string;
  readonly api_version?: 'v1' | 'v2';
  readonly event_types?: readonly string[];
  readonly fail?: 'always' | 'timeout' | { readonly first: number };
}

export interface Scenario {
  readonly name?: string;
  readonly description?: string;
  /** Assumed share of otherwise approved authorizations declined (`card_declined`), drawn from the seed. */
  readonly decline_rate?: number;
  readonly accounts?: readonly ScenarioAccount[];
  readonly tenants?: readonly ScenarioSetup[];
  readonly plans?: readonly ScenarioSetup[];
  readonly customers?: readonly ScenarioCustomer[];
  readonly timeline?: readonly ScenarioEntry[];
  readonly generators?: readonly SubscribersGenerator[];
  readonly webhooks?: readonly ScenarioWebhook[];
  /** Dated account settings of a what-if overlay (see ScenarioAccount.from). */
  readonly account_changes?: readonly AccountChange[];
}

/** A bad scenario file or range: the message names the file and the entry. */
export class ScenarioError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ScenarioError';
  }
}

/** One operation call of the simulation, in the order it runs. */
export interface Step {
  /** Where it comes from, for reports and errors: `timeline[3]`, `plans[0]`, `generators[0] #15`. */
  readonly entry: string;
  readonly at: Date;
  readonly op: string;
  readonly params: JsonObject;
  readonly ref: string | undefined;
  /** Account id; resolved against the scenario's accounts (the first one when absent). */
  readonly account: string;
  readonly livemode: boolean;
  readonly forEach?: ForEach;
  /**
   * Set on the three steps of a generated subscriber (token, customer, subscription, back to back
   * at one instant): the simulator may sign up a run of them in bulk (src/subscriptions/new-subscribers.ts).
   */
  readonly subscriber?: 'token' | 'customer' | 'subscription';
}

/** Id of the account a scenario without `accounts` runs on. */
export const DEFAULT_ACCOUNT_ID = 'acct_default';

let validator: ((data: unknown) => boolean) & { errors?: ErrorObject[] | null } = undefined as never;

function schemaValidator() {
  if (!validator) {
    const ajv = new Ajv({ allErrors: false, strict: false });
    validator = ajv.compile(JSON.parse(readFileSync(SCENARIO_SCHEMA_PATH, 'utf8')) as object);
  }
  return validator;
}

/** `/timeline/3/op` → `timeline[3].op`. */
function pointerToPath(pointer: string): string {
  return pointer
    .split('/')
    .filter((part) => part !== '')
    .map((part, i) => (/^\d+$/.test(part) ? `[${part}]` : i === 0 ? part : `.${part}`))
    .join('');
}

/** Reads and checks a scenario file against the schema; `source` names it in errors. */
export function parseScenario(text: string, source: string): Scenario {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (error) {
    throw new ScenarioError(`${source}: not valid JSON: ${(error as Error).message}`);
  }
  const validate = schemaValidator();
  if (!validate(data)) {
    const error = validate.errors?.[0];
    const where = error ? pointerToPath(error.instancePath) || '(top level)' : '(top level)';
    const detail = error?.params && 'additionalProperty' in error.params ? ` (${String(error.params.additionalProperty)})` : '';
    throw new ScenarioError(`${source}: ${where}: ${error?.message ?? 'does not match the scenario schema'}${detail}`);
  }
  return data as Scenario;
}

export function loadScenario(path: string): Scenario {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new ScenarioError(`cannot read scenario ${path}: ${(error as Error).message}`);
  }
  return parseScenario(text, path);
}

/**
 * A what-if overlay on a baseline: its setup sections, generators and timeline entries are added
 * to the baseline's; an account with an id the baseline has overrides that account's settings
 * (fee rates and options merge key by key), a new id adds an account; its decline rate, if it
 * has one, replaces the baseline's.
 */
export function overlayScenario(base: Scenario, overlay: Scenario): Scenario {
  const accounts = [...(base.accounts ?? [])];
  const changes: AccountChange[] = [...(base.account_changes ?? [])];
  for (const [i, extra] of (overlay.accounts ?? []).entries()) {
    const id = extra.id ?? (accounts.length === 0 ? DEFAULT_ACCOUNT_ID : undefined);
    const at = accounts.findIndex((account) => (account.id ?? DEFAULT_ACCOUNT_ID) === id);
    if (extra.from !== undefined) {
      // Settings from a date: the baseline's account as it is, then a change at that instant.
      if (id === undefined || (at < 0 && !(accounts.length === 0 && id === DEFAULT_ACCOUNT_ID))) {
        throw new ScenarioError(`what-if accounts[${i}].from: only settings of an account of the baseline can take effect from a date`);
      }
      const others = Object.keys(extra).filter((key) => !['id', 'from', 'fee_rates', 'options', 'service_plan'].includes(key));
      if (others.length > 0) throw new ScenarioError(`what-if accounts[${i}].from: only fee_rates, options and service_plan can take effect from a date, not ${others.join(', ')}`);
      changes.push({
        entry: `what-if accounts[${i}]`,
        account: id,
        from: extra.from,
        ...(extra.fee_rates ? { fee_rates: extra.fee_rates } : {}),
        ...(extra.options ? { options: extra.options } : {}),
        ...(extra.service_plan ? { service_plan: extra.service_plan } : {}),
      });
      continue;
    }
    if (at < 0) {
      accounts.push(extra);
      continue;
    }
    const current = accounts[at]!;
    accounts[at] = {
      ...current,
      ...extra,
      fee_rates: { ...current.fee_rates, ...extra.fee_rates },
      options: { ...current.options, ...extra.options },
    };
  }
  const join = <T>(a: readonly T[] | undefined, b: readonly T[] | undefined): T[] => [...(a ?? []), ...(b ?? [])];
  const declineRate = overlay.decline_rate ?? base.decline_rate;
  return {
    name: base.name,
    description: base.description,
    ...(declineRate !== undefined ? { decline_rate: declineRate } : {}),
    accounts: accounts.length > 0 ? accounts : overlay.accounts,
    tenants: join(base.tenants, overlay.tenants),
    plans: join(base.plans, overlay.plans),
    customers: join(base.customers, overlay.customers),
    timeline: join(base.timeline, overlay.timeline),
    generators: join(base.generators, overlay.generators),
    webhooks: join(base.webhooks, overlay.webhooks),
    ...(changes.length > 0 ? { account_changes: changes } : {}),
  };
}

/** The accounts a scenario runs on, each with its id settled. */
export function scenarioAccounts(scenario: Scenario): (ScenarioAccount & { readonly id: string })[] {
  const accounts = scenario.accounts?.length ? scenario.accounts : [{ id: DEFAULT_ACCOUNT_ID, name: 'Simulation' }];
  const seen = new Set<string>();
  return accounts.map((account, i) => {
    const id = account.id ?? (i === 0 ? DEFAULT_ACCOUNT_ID : `acct_sim${i + 1}`);
    if (seen.has(id)) throw new ScenarioError(`accounts[${i}]: account ${id} is defined twice`);
    if (account.from !== undefined) throw new ScenarioError(`accounts[${i}].from: only a what-if overlay's account settings can take effect from a date`);
    seen.add(id);
    return { ...account, id };
  });
}

const REF = /^\$([A-Za-z][A-Za-z0-9_-]*)((?:\.[A-Za-z0-9_]+)*)$/;

/** A parameter value that refers to an earlier result: `$label` or `$label.field.sub`. */
export function parseRef(value: string): { label: string; path: string[] } | undefined {
  if (!value.startsWith('$') || value.startsWith('$$')) return undefined;
  const match = REF.exec(value);
  if (!match) return { label: value.slice(1), path: [] };
  return { label: match[1]!, path: match[2] ? match[2].slice(1).split('.') : [] };
}

/** Every `$label` a value refers to (deep). */
export function refsIn(value: unknown, into: string[] = []): string[] {
  if (typeof value === 'string') {
    const ref = parseRef(value);
    if (ref) into.push(ref.label);
  } else if (Array.isArray(value)) {
    for (const item of value) refsIn(item, into);
  } else if (value !== null && typeof value === 'object') {
    for (const item of Object.values(value)) refsIn(item, into);
  }
  return into;
}

function instantOf(text: string, where: string): Date {
  try {
    return parseInstant(text);
  } catch (error) {
    throw new ScenarioError(`${where}: ${(error as Error).message}`);
  }
}

/** A uniform draw in [0, 1) from a seeded word stream. */
function uniform(words: () => readonly number[]): () => number {
  let buffer: number[] = [];
  return () => {
    if (buffer.length === 0) buffer = [...words()];
    return buffer.pop()! / 2 ** 32;
  };
}

/** Expands one subscribers generator into token, customer and subscription steps. */
function generateSubscribers(generator: SubscribersGenerator, index: number, seed: number, account: string, to: Date): Step[] {
  const where = `generators[${index}]`;
  const from = instantOf(generator.from, `${where}.from`);
  const until = instantOf(generator.to, `${where}.to`);
  if (until.getTime() <= from.getTime()) throw new ScenarioError(`${where}: to (${generator.to}) must be after from (${generator.from})`);
  const mix = { declined: 0, overseas: 0, debit: 0, ...generator.card_mix };
  if (mix.declined + mix.overseas + mix.debit > 1) throw new ScenarioError(`${where}.card_mix: the shares add up to more than 1`);
  // Its own stream per generator, apart from the ids: adding an entry elsewhere in the scenario
  // does not move anyone's subscription instant or card.
  const draw = uniform(seededWords(seed * 7919 + 104_729 * (index + 1)));
  const prefix = generator.ref ?? `gen${index + 1}_`;
  const span = until.getTime() - from.getTime();
  const expYear = Number(to.toISOString().slice(0, 4)) + 5;
  const people: { at: Date; card: string; n: number }[] = [];
  for (let n = 1; n <= generator.count; n += 1) {
    // Whole seconds, like API timestamps.
    const at = new Date(from.getTime() + Math.floor((draw() * span) / 1000) * 1000);
    const pick = draw();
    const card =
      pick < mix.declined
        ? TEST_CARDS.declinesRenewals.number
        : pick < mix.declined + mix.overseas
          ? TEST_CARDS.overseas.number
          : pick < mix.declined + mix.overseas + mix.debit
            ? TEST_CARDS.debit.number
            : TEST_CARDS.visa.number;
    people.push({ at, card, n });
  }
  people.sort((a, b) => a.at.getTime() - b.at.getTime() || a.n - b.n);
  const source: GeneratorSource = { where, prefix, account, expYear, params: generator.params, plan: generator.plan, count: generator.count };
  const steps: Step[] = [];
  for (const person of people) {
    for (const kind of SUBSCRIBER_CALLS) steps.push(new SubscriberStep(source, person, kind));
  }
  return steps;
}

/** What a generator's steps share. */
interface GeneratorSource {
  readonly where: string;
  readonly prefix: string;
  readonly account: string;
  readonly expYear: number;
  readonly params: JsonObject | undefined;
  readonly plan: string;
  /** Subscribers it generates, numbered 1..count. */
  readonly count: number;
}

const SUBSCRIBER_CALLS = ['token', 'customer', 'subscription'] as const;
const SUBSCRIBER_OPS = { token: 'tokens.create', customer: 'customers.create', subscription: 'subscriptions.create' } as const;

/**
 * One call of a generated subscriber (its token, customer or subscription), read from the person
 * and the generator: the texts and parameters are made when asked for, not held. A plan holds a
 * step per call of the whole book until the run ends; as plain objects (each with its own
 * label, entry, reference texts and parameter objects) 100,000 sign-ups held some 250 MB.
 */
class SubscriberStep implements Step {
  constructor(
    readonly source: GeneratorSource,
    private readonly person: { readonly at: Date; readonly card: string; readonly n: number },
    readonly subscriber: 'token' | 'customer' | 'subscription',
  ) {}

  /** Generated subscribers are test-mode customers (on the prototype: one field less a step). */
  get livemode(): false {
    return false;
  }

  /** The subscriber's number in its generator (1..count). */
  get n(): number {
    return this.person.n;
  }

  get entry(): string {
    return `${this.source.where} #${this.person.n}`;
  }

  get at(): Date {
    return this.person.at;
  }

  get account(): string {
    return this.source.account;
  }

  get op(): string {
    return SUBSCRIBER_OPS[this.subscriber];
  }

  get ref(): string {
    const label = `${this.source.prefix}${this.person.n}`;
    return this.subscriber === 'subscription' ? label : `${label}_${this.subscriber}`;
  }

  get params(): JsonObject {
    const label = `${this.source.prefix}${this.person.n}`;
    if (this.subscriber === 'token') return { card: { number: this.person.card, exp_month: 12, exp_year: this.source.expYear, cvc: '123' } };
    if (this.subscriber === 'customer') return { card: `$${label}_token` };
    return { ...this.source.params, customer: `$${label}_customer`, plan: this.source.plan };
  }
}

export interface PlanOptions {
  readonly from: Date;
  readonly to: Date;
  readonly seed: number;
  /** Operation names the registry knows; an entry naming another is an error. */
  readonly operations: readonly string[];
}

/**
 * Flattens a scenario into the steps of a simulation over [from, to): setup sections first (at
 * `from` unless they name their own instant), then generators and the timeline, ordered by
 * instant (ties keep that order). Checks that every operation exists, every instant lies in the
 * range and every `$label` is defined by an earlier step.
 */
export function planSteps(scenario: Scenario, options: PlanOptions): Step[] {
  const { from, to } = options;
  if (from.getTime() >= to.getTime()) throw new ScenarioError(`--from (${formatJst(from)}) must be before --to (${formatJst(to)}); --to is exclusive`);
  const accounts = scenarioAccounts(scenario);
  const accountIds = new Set(accounts.map((account) => account.id));
  const defaultAccount = accounts[0]!.id;
  const accountOf = (value: string | undefined, where: string): string => {
    if (value === undefined) return defaultAccount;
    if (!accountIds.has(value)) throw new ScenarioError(`${where}.account: no account ${JSON.stringify(value)} in the scenario (accounts: ${[...accountIds].join(', ')})`);
    return value;
  };
  const steps: Step[] = [];
  const add = (step: Step) => steps.push(step);
  const atOf = (text: string | undefined, where: string): Date => (text === undefined ? from : instantOf(text, `${where}.at`));

  for (const [section, op] of [
    ['tenants', 'tenants.create'],
    ['plans', 'plans.create'],
  ] as const) {
    (scenario[section] ?? []).forEach((item, i) => {
      const where = `${section}[${i}]`;
      add({ entry: where, at: atOf(item.at, where), op, params: item.params, ref: item.ref, account: accountOf(item.account, where), livemode: item.livemode ?? false });
    });
  }
  (scenario.customers ?? []).forEach((customer, i) => {
    const where = `customers[${i}]`;
    const base = { entry: where, at: atOf(customer.at, where), account: accountOf(customer.account, where), livemode: customer.livemode ?? false };
    const label = customer.ref ?? `customer${i + 1}`;
    const params: JsonObject = { ...customer.params };
    if (customer.card) {
      add({ ...base, op: 'tokens.create', ref: `${label}_token`, params: { card: customer.card } });
      params.card = `$${label}_token`;
    }
    add({ ...base, op: 'customers.create', ref: label, params });
  });
  (scenario.generators ?? []).forEach((generator, i) => {
    for (const step of generateSubscribers(generator, i, options.seed, accountOf(generator.account, `generators[${i}]`), to)) add(step);
  });
  for (const change of scenario.account_changes ?? []) {
    const { fee_rates, options } = change;
    // A service plan is dated itself: it is written before the run (servicePlanSettings), not as a step.
    if (change.service_plan) {
      const at = instantOf(change.from, `${change.entry}.from`);
      if (at.getTime() < from.getTime() || at.getTime() >= to.getTime()) {
        throw new ScenarioError(`${change.entry}.service_plan (from ${formatJst(at)}): the instant is outside the simulated range [${formatJst(from)}, ${formatJst(to)})`);
      }
    }
    if (!fee_rates && !options) continue;
    add({
      entry: change.entry,
      at: instantOf(change.from, `${change.entry}.from`),
      op: ACCOUNT_SETTINGS_OP,
      params: { ...(fee_rates ? { fee_rates } : {}), ...(options ? { options } : {}) },
      ref: undefined,
      account: accountOf(change.account, change.entry),
      livemode: false,
    });
  }
  (scenario.timeline ?? []).forEach((entry, i) => {
    const where = `timeline[${i}]`;
    add({
      entry: where,
      at: instantOf(entry.at, `${where}.at`),
      op: entry.op,
      params: entry.params ?? {},
      ref: entry.ref,
      account: accountOf(entry.account, where),
      livemode: entry.livemode ?? false,
      ...(entry.for_each ? { forEach: entry.for_each } : {}),
    });
  });

  // By instant; entries sharing one keep the order they were added in (the sort is stable).
  steps.sort((a, b) => a.at.getTime() - b.at.getTime());
  const known = new Set([...options.operations, ACCOUNT_SETTINGS_OP, ADJUSTMENT_OP]);
  const labels = new PlannedLabels();
  // Made only for an error: a generated book has millions of steps.
  const whereOf = (step: Step) => `${step.entry} (${step.op} at ${formatJst(step.at)})`;
  for (const step of steps) {
    if (!known.has(step.op)) throw new ScenarioError(`${whereOf(step)}: unknown operation ${JSON.stringify(step.op)}`);
    if (step.at.getTime() < from.getTime() || step.at.getTime() >= to.getTime()) {
      throw new ScenarioError(`${whereOf(step)}: the instant is outside the simulated range [${formatJst(from)}, ${formatJst(to)})`);
    }
    if (step.forEach && !known.has(step.forEach.op)) throw new ScenarioError(`${whereOf(step)}: for_each: unknown operation ${JSON.stringify(step.forEach.op)}`);
    if (step.forEach && step.ref !== undefined) throw new ScenarioError(`${whereOf(step)}: an entry with for_each runs many times and cannot have a ref`);
    for (const label of labels.referencedBy(step)) {
      if (label === ITEM_LABEL && step.forEach) continue;
      if (!labels.has(label)) throw new ScenarioError(`${whereOf(step)}: $${label} does not name an earlier entry`);
    }
    if (step.ref !== undefined && !labels.define(step)) throw new ScenarioError(`${whereOf(step)}: the label ${step.ref} is used twice`);
  }
  return steps;
}

const SUBSCRIBER_BIT = { token: 1, customer: 2, subscription: 4 } as const;
const GENERATED_LABEL = /^([1-9][0-9]*)(?:_(token|customer))?$/;

/** A generator met while a plan is checked: a bit for each of its subscribers' labels defined so far. */
interface GeneratedLabels {
  readonly source: GeneratorSource;
  readonly bits: Uint8Array;
  /** The other generators whose labels can be equal to one of this one's (one prefix starts the other). */
  readonly rivals: GeneratedLabels[];
}

/**
 * The labels defined so far while a plan is checked in order. A generated subscriber's three
 * labels (`<prefix><n>_token`, `<prefix><n>_customer`, `<prefix><n>`) are three bits of its
 * generator's array, not three texts in a set: a book of 1,000,000 generated subscribers held
 * 3,000,000 labels here. What counts as defined, and as defined twice, is the same as with every
 * label in one set.
 */
class PlannedLabels {
  private readonly written = new Set<string>();
  private readonly generators = new Map<GeneratorSource, GeneratedLabels>();
  /** Generators whose own references (plan, params) were found defined: labels are never undefined again. */
  private readonly sourcesChecked = new Set<GeneratorSource>();

  /**
   * The labels a step refers to. A generated customer or subscription also names its own token or
   * customer, the step just before it at the same instant (the sort is stable): not looked up.
   */
  referencedBy(step: Step): string[] {
    if (!(step instanceof SubscriberStep)) return [...refsIn(step.params), ...refsIn(step.forEach?.params)];
    if (step.subscriber !== 'subscription' || this.sourcesChecked.has(step.source)) return [];
    this.sourcesChecked.add(step.source);
    const own = `${step.source.prefix}${step.n}_customer`;
    return refsIn(step.params).filter((label) => label !== own);
  }

  has(label: string): boolean {
    if (this.written.has(label)) return true;
    for (const generator of this.generators.values()) if (generatedHas(generator, label)) return true;
    return false;
  }

  /** Records the step's label; false when it was already defined. */
  define(step: Step): boolean {
    const label = step.ref!;
    if (!(step instanceof SubscriberStep)) {
      if (this.has(label)) return false;
      this.written.add(label);
      return true;
    }
    const generator = this.generators.get(step.source) ?? this.meet(step.source);
    if (this.written.has(label) || generator.rivals.some((rival) => generatedHas(rival, label))) return false;
    generator.bits[step.n] = generator.bits[step.n]! | SUBSCRIBER_BIT[step.subscriber];
    return true;
  }

  private meet(source: GeneratorSource): GeneratedLabels {
    const met: GeneratedLabels = { source, bits: new Uint8Array(source.count + 1), rivals: [] };
    for (const other of this.generators.values()) {
      if (!other.source.prefix.startsWith(source.prefix) && !source.prefix.startsWith(other.source.prefix)) continue;
      met.rivals.push(other);
      other.rivals.push(met);
    }
    this.generators.set(source, met);
    return met;
  }
}

/** Whether `label` is one of the generator's subscribers' labels defined so far. */
function generatedHas(generator: GeneratedLabels, label: string): boolean {
  const { prefix, count } = generator.source;
  if (!label.startsWith(prefix)) return false;
  const match = GENERATED_LABEL.exec(label.slice(prefix.length));
  if (!match) return false;
  const n = Number(match[1]);
  return n <= count && (generator.bits[n]! & SUBSCRIBER_BIT[(match[2] as 'token' | 'customer' | undefined) ?? 'subscription']) !== 0;
}

/**
 * The scenario's service plan settings in the order they are written before the run: each
 * account's own `service_plan` (in force from the start of the range, `from` undefined), then a
 * what-if's dated ones (`accounts[].from`) by instant. Plan settings are effective-dated, so they
 * are stored up front and the billing job reads the one in force at each month's start.
 */
export function servicePlanSettings(scenario: Scenario): ServicePlanChange[] {
  const own: ServicePlanChange[] = scenarioAccounts(scenario).flatMap((account, i) => (account.service_plan ? [{ entry: `accounts[${i}].service_plan`, account: account.id, from: undefined, plan: account.service_plan }] : []));
  const dated = (scenario.account_changes ?? [])
    .flatMap((change) => (change.service_plan ? [{ entry: `${change.entry}.service_plan`, account: change.account, from: instantOf(change.from, `${change.entry}.from`), plan: change.service_plan }] : []))
    .sort((a, b) => a.from.getTime() - b.from.getTime());
  return [...own, ...dated];
}
