import { z } from 'zod';

export const launchBody = z.object({
  playerRef: z.string().min(1).max(255),
  gameId: z.string().min(1).max(200),
  // Format is checked with the game's currencies (after the game lookup), as the contract orders the checks.
  currency: z.string(),
  mode: z.enum(['REAL', 'DEMO']),
  language: z.string().min(1).max(35).optional(),
  lobbyUrl: z.string().optional(),
});
export type LaunchBody = z.infer<typeof launchBody>;

export const kickBody = z.object({
  playerRef: z.string().min(1).max(255),
});

export const CURRENCY = /^[A-Z]{3}$/;
