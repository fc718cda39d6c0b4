// The typed hook converters, by hook type (every Forgejo type but
// forgejo/gitea/gogs, which get the stored payload as is).
import type { Converter } from './converter.ts';
import { dingtalk } from './dingtalk.ts';
import { discord } from './discord.ts';
import { feishu } from './feishu.ts';
import { matrix } from './matrix.ts';
import { msteams } from './msteams.ts';
import { packagist } from './packagist.ts';
import { slack } from './slack.ts';
import { sourcehutBuilds } from './sourcehut-builds.ts';
import { telegram } from './telegram.ts';
import { wechatwork } from './wechatwork.ts';

export type { Converted, ConvertInput, Converter, ManifestRead, TypedRequest } from './converter.ts';
export { manifestLocationOf } from './sourcehut-builds.ts';
export type { ManifestLocation } from './sourcehut-builds.ts';

const CONVERTERS: Readonly<Record<string, Converter>> = {
  slack,
  discord,
  msteams,
  telegram,
  dingtalk,
  feishu,
  wechatwork,
  matrix,
  packagist,
  sourcehut_builds: sourcehutBuilds,
};

/** The converter of a hook type, or null for the types sent as is and unknown ones. */
export function converterFor(type: string): Converter | null {
  return Object.hasOwn(CONVERTERS, type) ? (CONVERTERS[type] ?? null) : null;
}
