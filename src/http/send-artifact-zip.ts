// Sends an artifact's zip as a download, for the API's DownloadActionArtifact
// and the console's artifact link alike: a v4 artifact's stored zip through
// sendObject (one reused buffer, a known length), a v3 artifact's files zipped
// as they are read (no length is known beforehand, so it goes chunked).
import { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ArtifactZip } from '../services/actions/artifacts-rest.ts';
import { sendObject } from './send-object.ts';

export async function sendArtifactZip(
  req: FastifyRequest,
  reply: FastifyReply,
  zip: ArtifactZip,
): Promise<FastifyReply | undefined> {
  // The name is the artifact's, chosen by a workflow: percent-encoded, it cannot break out of the quotes.
  const disposition = `attachment; filename="${encodeURIComponent(zip.name)}.zip"`;
  if ('chunks' in zip)
    return reply
      .type('application/zip')
      .header('content-disposition', disposition)
      .send(Readable.from(zip.chunks, { objectMode: false }));
  // sendObject hijacks the reply, so no onSend hook runs for it: the headers those hooks would add are set here.
  reply.header('Cache-Control', 'max-age=0, private, must-revalidate, no-transform');
  reply.header('X-Content-Type-Options', 'nosniff');
  await sendObject(req, reply, zip.reader, { 'content-type': 'application/zip', 'content-disposition': disposition });
  return undefined;
}
