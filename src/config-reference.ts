// The configuration reference of the README, generated from the settings table
// (`node --import tsx src/config-reference.ts` prints it; a test keeps the README in step).
import { SETTINGS } from './config.ts';

export function renderConfigReference(): string {
  const rows = SETTINGS.map(
    (s) => `| \`${s.key}\` | ${s.default === '' ? '(unset)' : `\`${s.default}\``} | ${s.description} |`,
  );
  return ['| Variable | Default | Meaning |', '|---|---|---|', ...rows].join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(renderConfigReference());
