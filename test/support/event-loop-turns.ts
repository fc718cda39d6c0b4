// Counts turns of the event loop (one setImmediate after another), for tests
// that assert in which turn something happens relative to something else.

export interface TurnCounter {
  /** Turns that have begun since the counter started. */
  readonly now: number;
  /** Stops counting (the counter schedules nothing more). */
  stop(): void;
}

export function countTurns(): TurnCounter {
  let turn = 0;
  let counting = true;
  const tick = (): void => {
    if (!counting) return;
    turn += 1;
    setImmediate(tick);
  };
  setImmediate(tick);
  return {
    get now() {
      return turn;
    },
    stop() {
      counting = false;
    },
  };
}
