// What the daemon tells the world when a person is needed, and the hooks it offers the re-authorization page.
// The daemon only reports transitions (a profile parked for re-authorization, the loop closed, a connector
// failing too long, no live token too long); delivering them (src/notify/) and minting the links they carry
// (src/reauth/) live elsewhere and are wired in by the caller. Each type is owned where it is used from outside
// the daemon, so that notify/ and reauth/ need nothing of daemon/; they are named here for the daemon's callers.

export type { NoticeSink, NoticeType, ProfileNotice } from '../notify/notice.js';
export type { ReauthorizationResult, ReauthorizedGrant } from '../reauth/grant.js';
