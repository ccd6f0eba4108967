// Display helpers: unknown values print "no data", never 0.
export const NO_DATA = "no data";

export function num(value, digits = 1) {
  if (value === null || value === undefined || Number.isNaN(value)) return NO_DATA;
  return Number.isInteger(value) ? String(value) : value.toFixed(digits);
}

export const rate = (value) => (value === null || value === undefined ? NO_DATA : `${num(value)}/s`);

export function dateOf(value) {
  if (!value) return null;
  const text = typeof value === "object" ? value.$date : value;
  const moment = text ? new Date(text) : null;
  return moment && !Number.isNaN(moment.getTime()) ? moment : null;
}

export function duration(seconds) {
  if (seconds === null || seconds === undefined) return NO_DATA;
  const abs = Math.abs(seconds);
  if (abs < 120) return `${seconds.toFixed(1)} s`;
  if (abs < 7200) return `${(seconds / 60).toFixed(1)} min`;
  if (abs < 172800) return `${(seconds / 3600).toFixed(1)} h`;
  return `${(seconds / 86400).toFixed(1)} d`;
}

// Event-time lag: now minus the watermark (no watermark yet: unknown).
export function lagSeconds(watermark, now = Date.now()) {
  const moment = dateOf(watermark);
  return moment ? (now - moment.getTime()) / 1000 : null;
}

export function bytes(value) {
  if (value === null || value === undefined) return NO_DATA;
  if (value < 1024) return `${value} B`;
  if (value < 1048576) return `${(value / 1024).toFixed(1)} KiB`;
  return `${(value / 1048576).toFixed(1)} MiB`;
}

export const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;
