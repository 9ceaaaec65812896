/**
 * `bench neural`'s split of a run's wall time, on a hand-made log: the warm start before round 1,
 * and each round's critical path by phase (each phase from the previous one's last event to its
 * own).
 */
import { describe, expect, it } from 'vitest';
import { splitRounds } from '../../bench/neural.js';
import type { EventEnvelope } from '../../src/events/envelope.js';

const T0 = Date.parse('2026-12-05T10:00:00Z');
const at = (s: number, type: string, data: Record<string, unknown> = {}) =>
  ({ type, at: new Date(T0 + s * 1000).toISOString(), data }) as unknown as EventEnvelope;

describe('bench neural: where a run spends its time', () => {
  it('splits each round into generation, execution, judging and training, and times the warm start', () => {
    const events = [
      at(0, 'RunStarted'),
      at(40, 'TrainingStepCompleted', { round: 0, metrics: { seconds: 30 } }),
      at(41, 'WarmStartCheckpointed', { cached: false }),
      at(50, 'PolicyVersionPublished', { round: 0 }),
      at(60, 'RoundStarted', { round: 1 }),
      at(62, 'SolutionSampled', { round: 1 }),
      // The held-out programs are generation too, drawn after the G.
      at(65, 'HeldOutSampled', { round: 1 }),
      at(66, 'TestsSampled', { round: 1 }),
      at(70, 'ExecutionRequested', {}),
      at(75, 'ProgramExecuted', {}),
      at(76, 'RewardsAssigned', { round: 1 }),
      at(80, 'TrainingStepCompleted', { round: 1, metrics: { seconds: 3 } }),
      at(81, 'PolicyVersionPublished', { round: 1 }),
      at(82, 'RoundCompleted', { round: 1 }),
    ];
    const { warmStart, rounds } = splitRounds(events);
    expect(warmStart).toEqual({ seconds: 50, bridgeStepSeconds: 30, steps: 1, checkpoints: 1, cached: 0 });
    expect(rounds).toEqual([{ round: 1, seconds: { generation: 6, execution: 9, judging: 1, training: 5 }, total: 22, bridgeStepSeconds: 3 }]);
  });
});
