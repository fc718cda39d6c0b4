// Time is injected so tests can move it; stored times are Unix seconds.
export interface Clock {
  nowMs(): number;
  nowSec(): number;
}

export const systemClock: Clock = {
  nowMs: () => Date.now(),
  nowSec: () => Math.floor(Date.now() / 1000),
};

/**
 * Test seam (GANTRY_TEST_SCHEDULER_CLOCK), only for the schedule clock:
 * time runs `speed` times faster than `base` from the instant `anchorMs`, so
 * that every process given the same anchor agrees on the time.
 */
export function acceleratedClock(anchorMs: number, speed: number, base: Clock = systemClock): Clock {
  const nowMs = (): number => anchorMs + Math.floor((base.nowMs() - anchorMs) * speed);
  return { nowMs, nowSec: () => Math.floor(nowMs() / 1000) };
}
