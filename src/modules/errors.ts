// The one error type of the domain. Services throw it with a message that is
// safe to show; the HTTP layer maps the kind to a status in one place.

export type ErrorKind =
  | 'invalid' // 400
  | 'unauthorized' // 401
  | 'forbidden' // 403
  | 'not_found' // 404
  | 'conflict' // 409
  | 'too_large' // 413
  | 'unprocessable' // 422
  | 'locked' // 423
  | 'too_many_requests'; // 429

export interface AppErrorOptions {
  /** Forgejo's ctx.NotFound adds an `errors` array; handler-level 404s do not. */
  errors?: string[];
  /** Some Forgejo guards answer without the `url` key (account checks, sudo). */
  omitUrl?: boolean;
  /** Whole seconds for a Retry-After header (too_many_requests). */
  retryAfterSec?: number;
}

export class AppError extends Error {
  readonly kind: ErrorKind;
  readonly options: AppErrorOptions;

  constructor(kind: ErrorKind, message: string, options: AppErrorOptions = {}) {
    super(message);
    this.kind = kind;
    this.options = options;
  }

  static invalid(message: string): AppError {
    return new AppError('invalid', message);
  }
  static unauthorized(message: string): AppError {
    return new AppError('unauthorized', message);
  }
  static forbidden(message: string, options?: AppErrorOptions): AppError {
    return new AppError('forbidden', message, options);
  }
  /** Forgejo's standard not-found body: the localized text and an `errors` list. */
  static notFound(errors: string[] = [], message = "The target couldn't be found."): AppError {
    return new AppError('not_found', message, { errors });
  }
  /** A handler-level 404 (`ctx.Error(404, …)`): a message and no `errors` key. */
  static notFoundMessage(message: string): AppError {
    return new AppError('not_found', message);
  }
  static conflict(message: string): AppError {
    return new AppError('conflict', message);
  }
  static tooLarge(message: string): AppError {
    return new AppError('too_large', message);
  }
  static unprocessable(message: string): AppError {
    return new AppError('unprocessable', message);
  }
  static locked(message: string): AppError {
    return new AppError('locked', message);
  }
  static tooManyRequests(message: string, retryAfterSec: number): AppError {
    return new AppError('too_many_requests', message, { retryAfterSec });
  }
}

export const STATUS_OF_KIND: Readonly<Record<ErrorKind, number>> = {
  invalid: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  too_large: 413,
  unprocessable: 422,
  locked: 423,
  too_many_requests: 429,
};
