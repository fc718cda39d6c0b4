// Time is injected so tests can move it; stored times are Unix seconds.
export interface Clock {
  nowMs(): number;
  nowSec(): number;
}

export const systemClock: Clock = {
  nowMs: () => Date.now(),
  nowSec: () => Math.floor(Date.now() / 1000),
};
