//! SSH transport: connecting with libssh2 and speaking SFTP.

pub mod connect;
pub mod sftp;

pub use sftp::SftpRemote;
