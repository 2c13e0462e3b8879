/**
 * Model routing: picks the model for each turn at dispatch, by rules over what the previous turn
 * did — a heuristic, never a second model. A turn goes to the strong model when a rule in
 * `strongOn` holds (its first turn; after a failed done check, a failed or blocked or malformed tool
 * call, sub-run results, a compaction), otherwise to the cheap one. Pure: the loop records the
 * signals of each turn and asks for the next route.
 */
import { DEFAULT_STRONG_ON, type Routing, type RoutingRule } from '../domain/run-spec';

/** What happened in the turn just finished (all false before the first turn). */
export interface TurnSignals {
  failedCheck: boolean;
  failedTool: boolean;
  blockedCall: boolean;
  malformedCall: boolean;
  subRunResults: boolean;
  compacted: boolean;
}

export const NO_SIGNALS: TurnSignals = { failedCheck: false, failedTool: false, blockedCall: false, malformedCall: false, subRunResults: false, compacted: false };

export interface Route {
  model: string;
  tier: 'strong' | 'cheap';
  /** The rule that sent the turn to the strong model; null for a cheap turn. */
  rule: RoutingRule | null;
}

const HOLDS: Record<RoutingRule, (turn: number, s: TurnSignals) => boolean> = {
  'first-turn': (turn) => turn === 1,
  'after-failed-check': (_t, s) => s.failedCheck,
  'after-failed-tool': (_t, s) => s.failedTool,
  'after-blocked-call': (_t, s) => s.blockedCall,
  'after-malformed-call': (_t, s) => s.malformedCall,
  'after-sub-run': (_t, s) => s.subRunResults,
  'after-compaction': (_t, s) => s.compacted,
};

/** The route of turn `turn` (1-based) given the previous turn's signals. */
export function routeTurn(routing: Routing, turn: number, previous: TurnSignals): Route {
  const rule = routing.strongOn.find((r) => HOLDS[r](turn, previous)) ?? null;
  return rule ? { model: routing.strong, tier: 'strong', rule } : { model: routing.cheap, tier: 'cheap', rule: null };
}

/**
 * The routing of a run: its own `routing`; else none when it names a `model`; else the server's
 * CORRAL_ROUTING_* (when set).
 */
export function routingFor(
  spec: { model?: string | undefined; routing?: Routing | undefined },
  config: { CORRAL_ROUTING_STRONG_MODEL?: string | undefined; CORRAL_ROUTING_CHEAP_MODEL?: string | undefined; CORRAL_ROUTING_STRONG_ON?: RoutingRule[] | undefined },
): Routing | undefined {
  if (spec.routing) return spec.routing;
  if (spec.model || !config.CORRAL_ROUTING_STRONG_MODEL || !config.CORRAL_ROUTING_CHEAP_MODEL) return undefined;
  return { strong: config.CORRAL_ROUTING_STRONG_MODEL, cheap: config.CORRAL_ROUTING_CHEAP_MODEL, strongOn: config.CORRAL_ROUTING_STRONG_ON ?? [...DEFAULT_STRONG_ON] };
}
