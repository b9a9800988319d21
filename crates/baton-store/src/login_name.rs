//! The current user's login name from the password database (`getpwuid_r`, thread-safe):
//! one lookup for the audit log's `user` and for SSH's default user name.

/// The password database's name for the real uid, or `None` when it has none.
pub fn from_passwd() -> Option<String> {
    // SAFETY: getpwuid_r writes into `pwd` and `buf`, which outlive the call, and sets
    // `result` to null or to `&pwd`; `pw_name` points into `buf`, still alive when read.
    unsafe {
        let uid = libc::getuid();
        let mut pwd: libc::passwd = std::mem::zeroed();
        let mut buf = vec![0 as libc::c_char; 16 * 1024];
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        let rc = libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut result);
        if rc == 0
            && !result.is_null()
            && !pwd.pw_name.is_null()
            && let Ok(name) = std::ffi::CStr::from_ptr(pwd.pw_name).to_str()
            && !name.is_empty()
        {
            return Some(name.to_string());
        }
    }
    None
}

/// `$USER`, else `$LOGNAME`, when set and not empty.
pub fn from_env() -> Option<String> {
    std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty())
        .or_else(|| std::env::var("LOGNAME").ok().filter(|u| !u.is_empty()))
}

/// The real uid, for when neither names the user.
pub fn uid() -> u32 {
    rustix::process::getuid().as_raw()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_passwd_name_is_what_id_says() {
        let out = std::process::Command::new("id")
            .arg("-un")
            .output()
            .unwrap();
        let id = String::from_utf8(out.stdout).unwrap();
        assert_eq!(super::from_passwd().as_deref(), Some(id.trim()));
    }
}
