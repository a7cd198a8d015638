import type { Migration } from '../db/migrations.ts';
import { PgListener } from '../db/listener.ts';
import { withTransaction, type Pool, type PoolClient } from '../db/pool.ts';
import { badRequest } from '../errors.ts';
import { campaignOver, catalogSchema, formatPath, offersCurrency, type Campaign, type CatalogInput, type Game, type Operator, type Provider } from './schema.ts';

export const catalogMigrations: Migration[] = [
  {
    id: 'catalog-001',
    sql: `
      CREATE TABLE catalog_providers (id text PRIMARY KEY, doc jsonb NOT NULL, updated_at timestamptz NOT NULL DEFAULT now());
      CREATE TABLE catalog_games (id text PRIMARY KEY, provider_id text NOT NULL REFERENCES catalog_providers (id), doc jsonb NOT NULL);
      CREATE TABLE catalog_operators (id text PRIMARY KEY, doc jsonb NOT NULL, updated_at timestamptz NOT NULL DEFAULT now());
      CREATE TABLE catalog_campaigns (id text PRIMARY KEY, doc jsonb NOT NULL, updated_at timestamptz NOT NULL DEFAULT now());
    `,
  },
];

const CHANNEL = 'catalog_changed';

export interface GameEntry {
  game: Game;
  provider: Provider;
}

/** An immutable view of the whole catalog. */
export class CatalogSnapshot {
  readonly providers = new Map<string, Provider>();
  readonly operators = new Map<string, Operator>();
  readonly campaigns = new Map<string, Campaign>();
  readonly games = new Map<string, GameEntry>();

  constructor(providers: Provider[], operators: Operator[], campaigns: Campaign[]) {
    for (const p of providers) {
      this.providers.set(p.id, p);
      for (const g of p.games) this.games.set(g.id, { game: g, provider: p });
    }
    for (const o of operators) this.operators.set(o.id, o);
    for (const c of campaigns) this.campaigns.set(c.id, c);
  }
}

export class CatalogError extends Error {
  override name = 'CatalogError';
}

/** Validates a catalog document; throws CatalogError naming the first bad field. */
export function parseCatalog(raw: unknown): CatalogInput {
  const parsed = catalogSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const where = formatPath(issue.path) || '(root)';
    throw new CatalogError(`catalog: ${where}: ${issue.message}`);
  }
  return parsed.data;
}

/**
 * A campaign that can still be granted (not over: active, not past its validUntil) must be grantable in its
 * own currency: one its game's provider offers. Checked on
 * the catalog as this document leaves it, for the document's campaigns and for stored ones whose
 * provider the document changes (a provider dropping a currency an active campaign grants in). A stored
 * campaign its provider already did not offer is left to the grant's refusal, so an unrelated change is
 * never refused for it.
 */
async function refuseUngrantableCampaigns(client: PoolClient, doc: CatalogInput, owner: ReadonlyMap<string, string>, now: Date): Promise<void> {
  const [stored, storedCampaigns] = await Promise.all([
    client.query<{ id: string; doc: Pick<Provider, 'currencies'> }>('SELECT id, doc FROM catalog_providers'),
    client.query<{ doc: Campaign }>('SELECT doc FROM catalog_campaigns'),
  ]);
  const before = new Map(stored.rows.map((r) => [r.id, r.doc]));
  const after = new Map<string, Pick<Provider, 'currencies'>>(before);
  const index = new Map<string, number>();
  doc.providers.forEach((p, pi) => {
    after.set(p.id, p);
    index.set(p.id, pi);
  });
  const providerOf = (gameId: string) => owner.get(gameId)!;
  doc.campaigns.forEach((c, ci) => {
    const providerId = providerOf(c.gameId);
    if (!campaignOver(c, now) && !offersCurrency(after.get(providerId)!, c.currency)) {
      throw badRequest(
        `catalog: campaigns[${ci}].currency: "${c.currency}" is not a currency of game "${c.gameId}" (provider "${providerId}" offers ${after.get(providerId)!.currencies.join(', ')}); it could never be granted`,
      );
    }
  });
  const named = new Set(doc.campaigns.map((c) => c.id));
  for (const { doc: c } of storedCampaigns.rows) {
    if (campaignOver(c, now) || named.has(c.id)) continue;
    const providerId = providerOf(c.gameId);
    const pi = index.get(providerId);
    if (pi === undefined || !offersCurrency(before.get(providerId) ?? { currencies: [] }, c.currency)) continue;
    if (!offersCurrency(after.get(providerId)!, c.currency)) {
      throw badRequest(
        `catalog: providers[${pi}].currencies: active campaign "${c.id}" grants in "${c.currency}", which this list drops; keep the currency or deactivate the campaign in the same document`,
      );
    }
  }
}

/**
 * The catalog lives in Postgres so every process sees the same one; each process keeps a snapshot in
 * memory (the signature check reads it on every request) and reloads it when another process applies
 * a catalog (NOTIFY catalog_changed).
 */
export class CatalogStore {
  private current = new CatalogSnapshot([], [], []);
  private readonly listener: PgListener;
  private reloading: Promise<void> = Promise.resolve();
  private readonly listeners = new Set<() => void>();

  constructor(
    private readonly pool: Pool,
    connectionString: string,
    private readonly onReloadError: (err: unknown) => void = () => undefined,
  ) {
    this.listener = new PgListener(connectionString, CHANNEL, () => {
      this.reload().catch(this.onReloadError);
    });
  }

  /** Loads the snapshot and starts following changes made by other processes. */
  async start(): Promise<void> {
    await this.reload();
    await this.listener.start();
  }

  async close(): Promise<void> {
    await this.listener.close();
    await this.reloading.catch(() => undefined);
  }

  snapshot(): CatalogSnapshot {
    return this.current;
  }

  /** Calls `listener` after every reload (this process's apply or another's); returns the unsubscribe. */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Inserts or updates every entry of the document in one transaction; entries not named stay as they
   * are. A document that fails validation, or that contradicts the catalog (a game id owned by another
   * provider, a reference to an unknown game), is refused whole with a message naming the field.
   */
  async apply(raw: unknown): Promise<void> {
    let doc: CatalogInput;
    try {
      doc = parseCatalog(raw);
    } catch (err) {
      if (err instanceof CatalogError) throw badRequest(err.message);
      throw err;
    }
    await withTransaction(this.pool, async (client) => {
      await client.query('SELECT pg_advisory_xact_lock(7281002)');
      const { rows } = await client.query<{ id: string; provider_id: string }>('SELECT id, provider_id FROM catalog_games');
      const owner = new Map(rows.map((r) => [r.id, r.provider_id]));
      doc.providers.forEach((p, pi) =>
        p.games.forEach((g, gi) => {
          const existing = owner.get(g.id);
          if (existing !== undefined && existing !== p.id) {
            throw badRequest(`catalog: providers[${pi}].games[${gi}].id: game "${g.id}" already belongs to provider "${existing}"`);
          }
          owner.set(g.id, p.id);
        }),
      );
      doc.operators.forEach((o, oi) =>
        o.visibleGames.forEach((g, gi) => {
          if (!owner.has(g)) throw badRequest(`catalog: operators[${oi}].visibleGames[${gi}]: unknown game "${g}"`);
        }),
      );
      doc.campaigns.forEach((c, ci) => {
        if (!owner.has(c.gameId)) throw badRequest(`catalog: campaigns[${ci}].gameId: unknown game "${c.gameId}"`);
      });
      await refuseUngrantableCampaigns(client, doc, owner, new Date());

      for (const p of doc.providers) {
        await client.query(
          `INSERT INTO catalog_providers (id, doc) VALUES ($1, $2)
           ON CONFLICT (id) DO UPDATE SET doc = EXCLUDED.doc, updated_at = now()`,
          [p.id, JSON.stringify({ ...p, games: [] })],
        );
        for (const g of p.games) {
          await client.query(
            `INSERT INTO catalog_games (id, provider_id, doc) VALUES ($1, $2, $3)
             ON CONFLICT (id) DO UPDATE SET doc = EXCLUDED.doc`,
            [g.id, p.id, JSON.stringify(g)],
          );
        }
      }
      for (const [table, entries] of [
        ['catalog_operators', doc.operators],
        ['catalog_campaigns', doc.campaigns],
      ] as const) {
        for (const e of entries) {
          await client.query(
            `INSERT INTO ${table} (id, doc) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET doc = EXCLUDED.doc, updated_at = now()`,
            [e.id, JSON.stringify(e)],
          );
        }
      }
      await client.query(`SELECT pg_notify('${CHANNEL}', '')`);
    });
    await this.reload();
  }

  /** Reloads run one after the other, so an older read can never overwrite a newer one. */
  private reload(): Promise<void> {
    const next = this.reloading.catch(() => undefined).then(() => this.readSnapshot());
    this.reloading = next;
    return next;
  }

  private async readSnapshot(): Promise<void> {
    const [providers, games, operators, campaigns] = await Promise.all([
      this.pool.query<{ doc: Provider }>('SELECT doc FROM catalog_providers ORDER BY id'),
      this.pool.query<{ provider_id: string; doc: Game }>('SELECT provider_id, doc FROM catalog_games ORDER BY id'),
      this.pool.query<{ doc: Operator }>('SELECT doc FROM catalog_operators ORDER BY id'),
      this.pool.query<{ doc: Campaign }>('SELECT doc FROM catalog_campaigns ORDER BY id'),
    ]);
    const byProvider = new Map<string, Game[]>();
    for (const g of games.rows) byProvider.set(g.provider_id, [...(byProvider.get(g.provider_id) ?? []), g.doc]);
    this.current = new CatalogSnapshot(
      providers.rows.map((r) => ({ ...r.doc, games: byProvider.get(r.doc.id) ?? [] })),
      operators.rows.map((r) => r.doc),
      campaigns.rows.map((r) => r.doc),
    );
    for (const listener of this.listeners) listener();
  }
}
