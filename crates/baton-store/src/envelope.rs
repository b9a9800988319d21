//! At-rest encryption with age (store-format/ENCRYPTION.md): how stored bytes are sealed
//! and opened, how storage names are derived, and how a store's keys are unlocked.
//!
//! Object ids never change: they are the BLAKE3 of the plaintext everywhere. Only the
//! storage name (loose object path, pack index entry) and the stored bytes differ.

use std::io::{self, BufReader, Read, Write};
use std::path::Path;
use std::sync::Arc;

use age::secrecy::{ExposeSecret, SecretString};

use super::key_wrap::{StoreKeyWrap, random_bytes};
use baton_error::{Error, ErrorKind, Result};
use baton_format::ObjectId;
use baton_format::config::EncryptionConfig;

pub const FEATURE: &str = "age-v1";
/// Prefix of an encrypted free-text field in the log and ref generation files.
pub(crate) const TEXT_PREFIX: &str = "age:";

pub struct AgeKeys {
    recipients: Vec<age::x25519::Recipient>,
    identities: Vec<Box<dyn age::Identity + Send + Sync>>,
    name_key: [u8; 32],
    wrap: StoreKeyWrap,
}

/// How an object's stored bytes are wrapped.
#[derive(Clone, Default)]
pub enum Envelope {
    /// A plain store: stored bytes are one zstd frame, named by the object id.
    #[default]
    Plain,
    /// An encrypted store, unlocked.
    Age(Arc<AgeKeys>),
    /// An encrypted store without a working identity: nothing can be read or written.
    Locked,
}

/// Asks for a store's passphrase when one is needed (the command layer decides how: the
/// environment, a terminal prompt); the store never talks to a terminal itself.
pub(crate) type PassphraseSource = Arc<dyn Fn() -> Result<SecretString> + Send + Sync>;

/// Where the keys come from, resolved by the command layer and handed down.
#[derive(Clone, Default)]
pub struct KeySource {
    /// An age identity file (`--identity` or `$BATON_IDENTITY`).
    pub identity: Option<std::path::PathBuf>,
    /// Called only when a passphrase-protected store is unlocked.
    pub passphrase: Option<PassphraseSource>,
}

impl std::fmt::Debug for KeySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeySource")
            .field("identity", &self.identity)
            .field(
                "passphrase",
                &self.passphrase.as_ref().map(|_| "(asked when needed)"),
            )
            .finish()
    }
}

pub fn security(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::Security, message)
}

fn locked() -> Error {
    security("the store is encrypted and no identity unlocked it")
        .with_hint("pass --identity FILE or set BATON_IDENTITY (or BATON_PASSPHRASE)")
}

impl Envelope {
    pub fn is_encrypted(&self) -> bool {
        !matches!(self, Envelope::Plain)
    }

    pub fn is_locked(&self) -> bool {
        matches!(self, Envelope::Locked)
    }

    /// The storage name of object `id`: the id itself in a plain store, else
    /// `BLAKE3-keyed(name_key, id)`. A locked store answers with the id (never used:
    /// every read and write of a locked store fails first).
    pub fn name_of(&self, id: &ObjectId) -> ObjectId {
        match self {
            Envelope::Age(keys) => {
                ObjectId::from_hash(blake3::keyed_hash(&keys.name_key, id.as_bytes()))
            }
            _ => *id,
        }
    }

    /// A reader of the zstd frame inside stored bytes.
    pub fn open<'a, R: Read + 'a>(&self, id: &ObjectId, stored: R) -> Result<Box<dyn Read + 'a>> {
        match self {
            Envelope::Plain => Ok(Box::new(stored)),
            Envelope::Locked => Err(locked()),
            Envelope::Age(keys) => keys.decrypt_reader(stored).map_err(|e| {
                Error::integrity(format!("object {id} is corrupt: cannot decrypt: {e}"))
                    .with_hint("run 'baton verify', then 'baton pull --repair [TARGET]' to refetch it from a target")
                    .with_source(e)
            }),
        }
    }

    /// Seal a zstd frame held in memory.
    pub(crate) fn seal_bytes(&self, compressed: Vec<u8>) -> Result<Vec<u8>> {
        match self {
            Envelope::Plain => Ok(compressed),
            Envelope::Locked => Err(locked()),
            Envelope::Age(keys) => {
                let mut out = Vec::with_capacity(compressed.len() + 256);
                let mut w = keys.encrypt_writer(&mut out)?;
                w.write_all(&compressed)
                    .and_then(|_| w.finish().map(|_| ()))
                    .map_err(|e| Error::other(format!("age encryption failed: {e}")))?;
                Ok(out)
            }
        }
    }

    /// A writer that seals what is written to it into `sink`; call `finish`.
    pub(crate) fn seal_writer<W: Write>(&self, sink: W) -> Result<SealWriter<W>> {
        match self {
            Envelope::Plain => Ok(SealWriter::Plain(sink)),
            Envelope::Locked => Err(locked()),
            Envelope::Age(keys) => Ok(SealWriter::Age(keys.encrypt_writer(sink)?)),
        }
    }

    /// Encrypt a free-text field (log and ref files) as `age:` + base64.
    pub(crate) fn seal_text(&self, text: &str) -> Result<String> {
        match self {
            Envelope::Plain => Ok(text.to_string()),
            Envelope::Locked => Err(locked()),
            Envelope::Age(_) => {
                use base64::Engine;
                let sealed = self.seal_bytes(text.as_bytes().to_vec())?;
                Ok(format!(
                    "{TEXT_PREFIX}{}",
                    base64::engine::general_purpose::STANDARD.encode(sealed)
                ))
            }
        }
    }

    /// Decrypt a free-text field; `None` when it is sealed and cannot be opened here.
    pub fn open_text(&self, text: &str) -> Option<String> {
        let Some(b64) = text.strip_prefix(TEXT_PREFIX) else {
            return Some(text.to_string());
        };
        let Envelope::Age(keys) = self else {
            return None;
        };
        use base64::Engine;
        let bytes = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
        let mut reader = keys.decrypt_reader(&bytes[..]).ok()?;
        let mut out = Vec::new();
        reader.read_to_end(&mut out).ok()?;
        String::from_utf8(out).ok()
    }
}

pub(crate) enum SealWriter<W: Write> {
    Plain(W),
    Age(age::stream::StreamWriter<W>),
}

impl<W: Write> SealWriter<W> {
    pub fn finish(self) -> io::Result<W> {
        match self {
            SealWriter::Plain(w) => Ok(w),
            SealWriter::Age(w) => w.finish(),
        }
    }
}

impl<W: Write> Write for SealWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            SealWriter::Plain(w) => w.write(buf),
            SealWriter::Age(w) => w.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            SealWriter::Plain(w) => w.flush(),
            SealWriter::Age(w) => w.flush(),
        }
    }
}

impl AgeKeys {
    fn encrypt_writer<W: Write>(&self, sink: W) -> Result<age::stream::StreamWriter<W>> {
        let encryptor = age::Encryptor::with_recipients(
            self.recipients
                .iter()
                .map(|r| r as &dyn age::Recipient)
                .chain([&self.wrap as &dyn age::Recipient]),
        )
        .map_err(|e| Error::other(format!("age encryption failed: {e}")))?;
        encryptor
            .wrap_output(sink)
            .map_err(|e| Error::other(format!("age encryption failed: {e}")))
    }

    fn decrypt_reader<'a, R: Read + 'a>(
        &self,
        stored: R,
    ) -> std::result::Result<Box<dyn Read + 'a>, age::DecryptError> {
        let decryptor = age::Decryptor::new_buffered(BufReader::new(stored))?;
        // The store's own wrap first: it opens baton's objects without an X25519
        // exchange; objects from before it existed fall through to the identities.
        let reader = decryptor.decrypt(
            std::iter::once(&self.wrap as &dyn age::Identity).chain(
                self.identities
                    .iter()
                    .map(|i| i.as_ref() as &dyn age::Identity),
            ),
        )?;
        Ok(Box::new(reader))
    }
}

/// Parse `age1...` recipients.
pub fn parse_recipients(list: &[String]) -> Result<Vec<age::x25519::Recipient>> {
    list.iter()
        .map(|r| {
            r.trim().parse::<age::x25519::Recipient>().map_err(|e| {
                Error::usage(format!(
                    "'{}' is not an age X25519 recipient: {e}",
                    r.escape_debug()
                ))
                .with_hint("recipients look like age1...; generate one with age-keygen")
            })
        })
        .collect()
}

fn encrypt_armored(recipients: &[&dyn age::Recipient], plaintext: &[u8]) -> Result<String> {
    use age::armor::{ArmoredWriter, Format};
    let fail = |e: String| Error::other(format!("age encryption failed: {e}"));
    let encryptor = age::Encryptor::with_recipients(recipients.iter().copied())
        .map_err(|e| fail(e.to_string()))?;
    let mut out = Vec::new();
    let armored = ArmoredWriter::wrap_output(&mut out, Format::AsciiArmor)
        .map_err(|e| fail(e.to_string()))?;
    let mut w = encryptor
        .wrap_output(armored)
        .map_err(|e| fail(e.to_string()))?;
    w.write_all(plaintext).map_err(|e| fail(e.to_string()))?;
    w.finish()
        .and_then(|a| a.finish())
        .map_err(|e| fail(e.to_string()))?;
    String::from_utf8(out).map_err(|e| fail(e.to_string()))
}

fn decrypt_armored(
    identities: &[&dyn age::Identity],
    armored: &str,
) -> std::result::Result<Vec<u8>, age::DecryptError> {
    let reader = age::armor::ArmoredReader::new(armored.as_bytes());
    let decryptor = age::Decryptor::new(reader)?;
    let mut r = decryptor.decrypt(identities.iter().copied())?;
    let mut out = Vec::new();
    r.read_to_end(&mut out)?;
    Ok(out)
}

/// The `encryption` section of a new store. With a passphrase, a fresh X25519 identity
/// is the store's only recipient and its secret key is kept in the config, sealed with
/// the passphrase (scrypt), so that the slow scrypt step runs once per command.
pub fn new_config(
    recipients: &[String],
    passphrase: Option<SecretString>,
) -> Result<EncryptionConfig> {
    let name_key = random_bytes::<32>()?;
    match passphrase {
        Some(pass) => {
            let identity = age::x25519::Identity::generate();
            let public = identity.to_public();
            let scrypt = age::scrypt::Recipient::new(pass);
            let sealed_identity = encrypt_armored(
                &[&scrypt as &dyn age::Recipient],
                identity.to_string().expose_secret().as_bytes(),
            )?;
            Ok(EncryptionConfig {
                recipients: vec![public.to_string()],
                passphrase: true,
                identity: Some(sealed_identity),
                name_key: encrypt_armored(&[&public as &dyn age::Recipient], &name_key)?,
            })
        }
        None => {
            let parsed = parse_recipients(recipients)?;
            if parsed.is_empty() {
                return Err(
                    Error::usage("an encrypted store needs at least one recipient").with_hint(
                        "pass --recipient age1..., --recipients-file FILE or --passphrase",
                    ),
                );
            }
            let refs: Vec<&dyn age::Recipient> =
                parsed.iter().map(|r| r as &dyn age::Recipient).collect();
            Ok(EncryptionConfig {
                recipients: parsed.iter().map(|r| r.to_string()).collect(),
                passphrase: false,
                identity: None,
                name_key: encrypt_armored(&refs, &name_key)?,
            })
        }
    }
}

/// Unlock a store's keys: load the identities, then unwrap the name key with them.
pub fn unlock(config: &EncryptionConfig, source: &KeySource) -> Result<Envelope> {
    let recipients = parse_recipients(&config.recipients)
        .map_err(|e| e.recast(ErrorKind::Integrity, "store config"))?;
    let identities: Vec<Box<dyn age::Identity + Send + Sync>> = if config.passphrase {
        let sealed = config.identity.as_deref().ok_or_else(|| {
            Error::integrity("store config: passphrase store without an identity")
        })?;
        let pass = match &source.passphrase {
            Some(ask) => ask()?,
            None => {
                return Err(
                    security("this store is protected by a passphrase and none was given")
                        .with_hint("set BATON_PASSPHRASE, or run on a terminal to be prompted"),
                );
            }
        };
        let scrypt = age::scrypt::Identity::new(pass);
        let secret =
            decrypt_armored(&[&scrypt as &dyn age::Identity], sealed).map_err(|e| match e {
                age::DecryptError::DecryptionFailed
                | age::DecryptError::NoMatchingKeys
                | age::DecryptError::KeyDecryptionFailed => {
                    security("wrong passphrase: it does not unlock this store")
                }
                other => Error::integrity(format!(
                    "store config: cannot open the sealed identity: {other}"
                )),
            })?;
        let text = String::from_utf8(secret)
            .map_err(|_| Error::integrity("store config: sealed identity is not text"))?;
        let identity: age::x25519::Identity = text
            .trim()
            .parse()
            .map_err(|e| Error::integrity(format!("store config: sealed identity: {e}")))?;
        vec![Box::new(identity)]
    } else {
        let path = match &source.identity {
            Some(p) => p.clone(),
            None => {
                return Err(security("the store is encrypted and no identity was given")
                    .with_hint("pass --identity FILE or set BATON_IDENTITY (an age identity file, as written by age-keygen)"));
            }
        };
        load_identities(&path)?
    };
    let refs: Vec<&dyn age::Identity> = identities
        .iter()
        .map(|i| i.as_ref() as &dyn age::Identity)
        .collect();
    let key = decrypt_armored(&refs, &config.name_key).map_err(|e| match e {
        age::DecryptError::NoMatchingKeys | age::DecryptError::DecryptionFailed => {
            security("wrong identity: it cannot decrypt this store's key")
                .with_hint("pass the identity whose public key is one of the store's recipients")
        }
        other => Error::integrity(format!("store config: cannot open the name key: {other}")),
    })?;
    let name_key: [u8; 32] = key
        .try_into()
        .map_err(|_| Error::integrity("store config: the name key is not 32 bytes"))?;
    Ok(Envelope::Age(Arc::new(AgeKeys {
        recipients,
        identities,
        wrap: StoreKeyWrap::from_name_key(&name_key),
        name_key,
    })))
}

fn load_identities(path: &Path) -> Result<Vec<Box<dyn age::Identity + Send + Sync>>> {
    let file = age::IdentityFile::from_file(path.to_string_lossy().into_owned()).map_err(|e| {
        security(format!("cannot read identity file {}: {e}", path.display()))
            .with_hint("pass an age identity file, as written by age-keygen")
            .with_source(e)
    })?;
    let ids = file.into_identities().map_err(|e| {
        security(format!(
            "identity file {} is not usable: {e}",
            path.display()
        ))
    })?;
    if ids.is_empty() {
        return Err(security(format!(
            "identity file {} holds no identity",
            path.display()
        )));
    }
    Ok(ids)
}
