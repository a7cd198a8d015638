import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify, type KeyObject } from 'node:crypto';
import type { Logger } from 'pino';
import { canonicalJson } from '../../shared/canonical.ts';
import { withTransaction, type Pool } from '../../shared/db/pool.ts';
import { everyInterval } from '../../shared/periodic.ts';
import type { ChainHead, ChainHeads } from './projection.ts';

/**
 * Signed checkpoints of the chain (contract section 10): every CHAIN_CHECKPOINT_SECONDS while new events
 * were linked, `{position, link, count, signedAt}` for the global chain and `{operatorId, position, link,
 * count, signedAt}` for each operator's, signed with Ed25519 over their canonical JSON (keys in order,
 * no whitespace; `link` in lowercase hex, `signedAt` ISO 8601 UTC with milliseconds). The signature
 * is base64; `keyId` names the key (the first 16 hex digits of the SHA-256 of its public key's DER).
 */

export interface SigningKey {
  keyId: string;
  privateKey: KeyObject;
  publicKeyPem: string;
}

export const keyIdOf = (publicKey: KeyObject): string =>
  createHash('sha256').update(publicKey.export({ type: 'spki', format: 'der' })).digest('hex').slice(0, 16);

const LOCK = 7281010;

/** A projector process started with a key that may not sign (see signingKey). */
export class RetiredKeyError extends Error {
  override name = 'RetiredKeyError';
}

/**
 * The key checkpoints are signed with: CHAIN_SIGNING_KEY when set (its public key is recorded, so
 * checkpoints signed with it stay verifiable after a rotation), else the one generated the first time
 * and kept in the database (every process finds the same one).
 */
export async function signingKey(pool: Pool, configuredPem: string | undefined): Promise<SigningKey> {
  return withTransaction(pool, async (client) => {
    await client.query('SELECT pg_advisory_xact_lock($1)', [LOCK]);
    let key: SigningKey;
    if (configuredPem !== undefined) {
      const privateKey = createPrivateKey(configuredPem);
      const publicKey = createPublicKey(privateKey);
      key = { keyId: keyIdOf(publicKey), privateKey, publicKeyPem: publicKey.export({ type: 'spki', format: 'pem' }).toString() };
      await client.query('INSERT INTO chain_keys (key_id, public_key) VALUES ($1, $2) ON CONFLICT (key_id) DO NOTHING', [key.keyId, key.publicKeyPem]);
    } else {
      const { rows } = await client.query<{ key_id: string; public_key: string; private_key: string }>(
        'SELECT key_id, public_key, private_key FROM chain_keys WHERE private_key IS NOT NULL ORDER BY created_at DESC LIMIT 1',
      );
      if (rows[0]) {
        key = { keyId: rows[0].key_id, privateKey: createPrivateKey(rows[0].private_key), publicKeyPem: rows[0].public_key };
      } else {
        const pair = generateKeyPairSync('ed25519');
        key = { keyId: keyIdOf(pair.publicKey), privateKey: pair.privateKey, publicKeyPem: pair.publicKey.export({ type: 'spki', format: 'pem' }).toString() };
        await client.query('INSERT INTO chain_keys (key_id, public_key, private_key) VALUES ($1, $2, $3)', [
          key.keyId,
          key.publicKeyPem,
          pair.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
        ]);
      }
    }
    // A retired key never signs again (a stale process or a rollback of the setting would otherwise take
    // over from the key that replaced it), nor does the service generate a key once a configured one signs.
    const { rows: own } = await client.query<{ retired_at: Date | null; private_key: string | null }>('SELECT retired_at, private_key FROM chain_keys WHERE key_id = $1', [key.keyId]);
    if (own[0]?.retired_at) {
      throw new RetiredKeyError(`CHAIN_SIGNING_KEY is key ${key.keyId}, retired at ${own[0].retired_at.toISOString()}: a retired key never signs again; set the key in use, or a new one`);
    }
    if (configuredPem === undefined) {
      const { rows: configured } = await client.query<{ key_id: string }>('SELECT key_id FROM chain_keys WHERE private_key IS NULL AND retired_at IS NULL AND key_id <> $1', [key.keyId]);
      if (configured[0]) throw new RetiredKeyError(`CHAIN_SIGNING_KEY is unset, but key ${configured[0].key_id} set by CHAIN_SIGNING_KEY signs this chain: set it on this process too`);
    }
    // The key in use is the only one that signs from now on: every other is retired as of the chain's
    // count now, and the private part of one the service generated is destroyed (it could sign again).
    await client.query(
      `UPDATE chain_keys SET retired_at = clock_timestamp(), retired_at_seq = (SELECT coalesce(max(seq), 0) FROM chain_links), private_key = NULL
       WHERE key_id <> $1 AND retired_at IS NULL`,
      [key.keyId],
    );
    return key;
  });
}

export interface CheckpointBody {
  operatorId?: string;
  position: string;
  link: string;
  count: number;
  signedAt: string;
}

export interface Checkpoint extends CheckpointBody {
  keyId: string;
  signature: string;
}

/** The bytes a checkpoint's signature covers. */
export const signedBytes = (body: CheckpointBody): Buffer => Buffer.from(canonicalJson(body), 'utf8');

export const signCheckpoint = (key: SigningKey, body: CheckpointBody): Checkpoint => ({
  ...body,
  keyId: key.keyId,
  signature: sign(null, signedBytes(body), key.privateKey).toString('base64'),
});

export function checkpointSignatureValid(c: Checkpoint, publicKeyPem: string): boolean {
  const { keyId: _k, signature, ...body } = c;
  try {
    return verify(null, signedBytes(body), createPublicKey(publicKeyPem), Buffer.from(signature, 'base64'));
  } catch {
    return false;
  }
}

interface CheckpointRow {
  chain: string;
  seq: string;
  position: string;
  link: string;
  signed_at: Date;
  key_id: string;
  signature: string;
}

export const checkpointOf = (r: CheckpointRow): Checkpoint => ({
  ...(r.chain !== '' ? { operatorId: r.chain } : {}),
  position: r.position,
  link: r.link,
  count: Number(r.seq),
  signedAt: r.signed_at.toISOString(),
  keyId: r.key_id,
  signature: r.signature,
});

/** Checkpoints of one chain ('' = the global one), oldest first. */
export async function checkpoints(pool: Pool, chain: string, after = 0, limit = 1000): Promise<Checkpoint[]> {
  const { rows } = await pool.query<CheckpointRow>(
    'SELECT chain, seq, position, link, signed_at, key_id, signature FROM chain_checkpoints WHERE chain = $1 AND seq > $2 ORDER BY seq LIMIT $3',
    [chain, after, limit],
  );
  return rows.map(checkpointOf);
}

/** A checkpoint's place in its chain: its count and its link (lowercase hex). */
export interface SignedPlace {
  count: number;
  link: string;
}

/**
 * What a signer knows of the chains from its earlier rounds: for each chain ('' = the global one), the
 * latest checkpoint it signed or found holding. Kept for the process's life: a move between stores,
 * which starts the chain again, is made with every process stopped (docs/operations.md), and a running
 * signer that found the chain started again under it would refuse it rather than forget what it signed.
 */
export interface SignerMemory {
  byChain: Map<string, SignedPlace>;
}

export const newSignerMemory = (): SignerMemory => ({ byChain: new Map() });

/**
 * Why a chain's head must not be signed, if it must not: a checkpoint vouches for everything before it,
 * so the chain must still hold what was signed before. The links signed by its latest checkpoint
 * (`latest`, whoever signed it) and by the one this signer remembers (`remembered`, which a deletion of
 * checkpoints does not take away) must still be the chain's at their counts (`linkAt`). Otherwise someone
 * rewrote the chain's tables (an event edited and the links computed again, the checkpoints after it
 * deleted): the heads signed are the ones this process's runner linked (ChainHeads), never the rows,
 * but a checkpoint over them would say the tables' chain holds, which it no longer does. A chain made
 * shorter by a failover that lost its last commits is refused (its runner halts too) until the projector
 * processes are restarted. The head to
 * sign (`head`, what this process's runner linked) must be in the tables too: a head whose commit a
 * failover lost is never signed. Not seen
 * (docs/auditors.md, where a checkpoint kept outside the service catches them): a process started
 * afresh, which remembers nothing and takes the tables' heads as they are.
 */
export function whyNotSign(
  remembered: SignedPlace | undefined,
  latest: SignedPlace | undefined,
  linkAt: (count: number) => string | undefined,
  head?: SignedPlace,
): string | undefined {
  if (head !== undefined && linkAt(head.count) !== head.link) {
    return `its link at count ${head.count}, this process's last, is no longer in its tables`;
  }
  if (remembered !== undefined && linkAt(remembered.count) !== remembered.link) {
    return `its link at count ${remembered.count} is no longer the one signed there`;
  }
  if (latest !== undefined && linkAt(latest.count) !== latest.link) {
    return `its link at count ${latest.count} is no longer the one its latest checkpoint signed`;
  }
  return undefined;
}

/** The later of two places in one chain (a deletion of checkpoints never takes a signer's memory back). */
const later = (a: SignedPlace | undefined, b: SignedPlace | undefined): SignedPlace | undefined => (a === undefined ? b : b === undefined || a.count >= b.count ? a : b);

/**
 * Whether the signer is late (the console's hash-chain tile): it signs every `periodSeconds` while new events
 * are linked (contract section 10), so events linked past the last checkpoint, which is older than two periods
 * and half a minute, are events it is not signing (say it refuses a chain rewritten under it). Before the
 * first checkpoint there is nothing to measure from: not late.
 */
export function signingLate(linked: number, last: { count: number; signedAt: Date } | undefined, now: Date, periodSeconds: number): boolean {
  return last !== undefined && linked > last.count && now.getTime() - last.signedAt.getTime() > (2 * periodSeconds + 30) * 1000;
}

export interface SigningRound {
  /** Checkpoints signed. */
  signed: number;
  /** Chains left unsigned, grown or not, because they no longer hold what was signed (whyNotSign), and why. */
  refused: Array<{ chain: string; why: string }>;
}

/**
 * Signs a checkpoint of every chain that grew since its last one, at the head `linked` holds (what this
 * process's chain runner committed, never a row read back: ChainHeads), unless the chain no longer holds
 * what was signed before (whyNotSign; `memory`, kept between a signer's rounds, is updated once they commit).
 * Holds its key's row while it signs, so a rotation (which retires the key) waits for it or is seen by
 * it: a key never signs past its retirement. The time signed is the database's, as the retirement's is.
 */
export async function signNewCheckpoints(pool: Pool, key: SigningKey, linked: ReadonlyMap<string, ChainHead> | undefined, memory: SignerMemory = newSignerMemory()): Promise<SigningRound> {
  // Nothing linked by this process yet: nothing it may sign.
  if (linked === undefined) return { signed: 0, refused: [] };
  const round = await withTransaction(pool, async (tx) => {
    const { rows: held } = await tx.query<{ retired_at: Date | null; now: Date }>('SELECT retired_at, clock_timestamp() AS now FROM chain_keys WHERE key_id = $1 FOR SHARE', [key.keyId]);
    if (!held[0] || held[0].retired_at !== null) return undefined;
    const signedAt = held[0].now.toISOString();
    const remembered = memory.byChain;
    // Each chain's latest checkpoint through the key, chain by chain (the chains linked, and those this
    // signer remembers): not a pass over every checkpoint ever signed, one a chain a minute.
    const { rows: last } = await tx.query<CheckpointRow>(
      `SELECT c.chain, c.seq, c.position, c.link, c.signed_at, c.key_id, c.signature
       FROM (SELECT DISTINCT unnest($1::text[]) AS chain) chains
       CROSS JOIN LATERAL (SELECT chain, seq, position, link, signed_at, key_id, signature FROM chain_checkpoints WHERE chain = chains.chain ORDER BY seq DESC LIMIT 1) c`,
      [['', ...linked.keys(), ...remembered.keys()]],
    );
    const latest = new Map(last.map((r) => [r.chain, { count: Number(r.seq), link: r.link }]));
    // Remembered from here on only if this key signed it (a row anyone could insert moves no memory).
    const vouched = new Set(last.filter((r) => r.key_id === key.keyId && checkpointSignatureValid(checkpointOf(r), key.publicKeyPem)).map((r) => r.chain));
    // The chain's links at the counts the checks compare: each chain's latest checkpoint, the one
    // remembered, and the head this process linked.
    const headOf = (chain: string): SignedPlace | undefined => {
      const h = linked.get(chain);
      return h === undefined ? undefined : { count: h.seq, link: h.link.toString('hex') };
    };
    const chains = new Set([...latest.keys(), ...remembered.keys(), ...linked.keys()]);
    const asked = [...chains].flatMap((chain) =>
      [latest.get(chain), remembered.get(chain), headOf(chain)].filter((p): p is SignedPlace => p !== undefined).map((p) => ({ chain, count: p.count })),
    );
    const { rows: stored } = await tx.query<{ chain: string; seq: string; link: Buffer | null }>(
      `SELECT q.chain, q.seq, CASE WHEN q.chain = '' THEN g.link ELSE o.operator_link END AS link
       FROM unnest($1::text[], $2::bigint[]) AS q(chain, seq)
       LEFT JOIN chain_links g ON q.chain = '' AND g.seq = q.seq
       LEFT JOIN chain_links o ON q.chain <> '' AND o.operator_id = q.chain AND o.operator_seq = q.seq`,
      [asked.map((a) => a.chain), asked.map((a) => a.count)],
    );
    const links = new Map(stored.map((r) => [`${r.chain}\n${r.seq}`, r.link?.toString('hex')]));
    const refused: SigningRound['refused'] = [];
    const holding = new Map<string, SignedPlace>();
    for (const chain of chains) {
      const why = whyNotSign(remembered.get(chain), latest.get(chain), (count) => links.get(`${chain}\n${count}`), headOf(chain));
      if (why !== undefined) {
        refused.push({ chain, why });
        continue;
      }
      const keep = later(remembered.get(chain), vouched.has(chain) ? latest.get(chain) : undefined);
      if (keep !== undefined) holding.set(chain, keep);
    }
    const refusedChains = new Set(refused.map((r) => r.chain));
    const fresh = [...linked].filter(([chain, h]) => h.seq > (latest.get(chain)?.count ?? 0) && !refusedChains.has(chain));
    const made = fresh.map(([chain, h]) =>
      signCheckpoint(key, { ...(chain !== '' ? { operatorId: chain } : {}), position: h.position, link: h.link.toString('hex'), count: h.seq, signedAt }),
    );
    if (made.length > 0) {
      // Two processes may sign the same head at once: the first one's stands (the same count and link).
      await tx.query(
        `INSERT INTO chain_checkpoints (chain, seq, position, link, signed_at, key_id, signature)
         SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::timestamptz[], $6::text[], $7::text[])
         ON CONFLICT (chain, seq) DO NOTHING`,
        [made.map((c) => c.operatorId ?? ''), made.map((c) => c.count), made.map((c) => c.position), made.map((c) => c.link), made.map(() => signedAt), made.map((c) => c.keyId), made.map((c) => c.signature)],
      );
    }
    for (const c of made) holding.set(c.operatorId ?? '', { count: c.count, link: c.link });
    // A refused chain keeps what was remembered of it, so it stays refused until the chain holds it again.
    for (const { chain } of refused) {
      const before = remembered.get(chain);
      if (before !== undefined) holding.set(chain, before);
    }
    return { holding, round: { signed: made.length, refused } };
  });
  if (round === undefined) return { signed: 0, refused: [] };
  // Committed: what was signed and checked is remembered for the next round.
  memory.byChain = round.holding;
  return round.round;
}

/**
 * The projector role's signer: every `seconds`, while its process's runner owns the chain (`owns`), a
 * checkpoint of each chain it grew (`heads`). A process standing by signs nothing: what it checked of
 * another's links (ChainHeads.follow) is never signed unless its own runner links on from there.
 */
export function startCheckpointSigner(
  pool: Pool,
  key: SigningKey,
  heads: ChainHeads,
  owns: () => boolean,
  seconds: number,
  logger: Logger,
  onRefused: (chain: string) => void = () => undefined,
): { stop(): Promise<void> } {
  const memory = newSignerMemory();
  // One round at a time (a round held up by a rotation's lock must not be overtaken: the last to end
  // would write an older memory over a newer one).
  return everyInterval(
    seconds * 1000,
    () =>
      signNewCheckpoints(pool, key, heads.linked(), memory)
        .then(({ signed, refused }) => {
          if (signed > 0) logger.debug({ checkpoints: signed }, 'chain checkpoints signed');
          for (const { chain, why } of refused) {
            logger.error({ chain: chain === '' ? 'global' : chain, why }, 'chain not signed: it no longer holds what was signed before (npm run audit -- verify-chain, and the checkpoints kept outside the service)');
            onRefused(chain);
          }
        })
        .catch((err: unknown) => logger.warn({ err: (err as Error).message }, 'chain checkpoints not signed; trying again at the next interval')),
    { when: owns },
  );
}
