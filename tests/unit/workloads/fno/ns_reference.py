"""Independent reference for the Navier-Stokes test: the same equations (vorticity form on the
unit torus, u = psi_y, v = -psi_x, -Lap psi = w, 2/3-rule dealiasing of the advection, forcing
a (sin 2pi(x+y) + cos 2pi(x+y))) integrated with classical RK4 at a small step, in numpy's full
complex FFT (not rfft), from the initial field in argv[1] to argv[2].

usage: ns_reference.py w0.npy out.npy nu a t_end dt
"""
import sys

import numpy as np

w0 = np.load(sys.argv[1]).astype(np.float64)
nu, amp, t_end, dt = (float(v) for v in sys.argv[3:7])
n = w0.shape[0]
k = np.fft.fftfreq(n, 1.0 / n)
kx, ky = np.meshgrid(k, k, indexing="ij")
lap = 4 * np.pi**2 * (kx**2 + ky**2)
inv_lap = np.where(lap > 0, 1.0 / np.where(lap > 0, lap, 1.0), 0.0)
keep = (np.abs(kx) * 3 < n) & (np.abs(ky) * 3 < n)
x = np.arange(n) / n
X, Y = np.meshgrid(x, x, indexing="ij")
f_hat = np.fft.fft2(amp * (np.sin(2 * np.pi * (X + Y)) + np.cos(2 * np.pi * (X + Y))))


def rhs(w_hat):
    psi = w_hat * inv_lap
    u = np.real(np.fft.ifft2(2j * np.pi * ky * psi))
    v = np.real(np.fft.ifft2(-2j * np.pi * kx * psi))
    wx = np.real(np.fft.ifft2(2j * np.pi * kx * w_hat))
    wy = np.real(np.fft.ifft2(2j * np.pi * ky * w_hat))
    return -nu * lap * w_hat - keep * np.fft.fft2(u * wx + v * wy) + f_hat


w_hat = np.fft.fft2(w0)
for _ in range(int(round(t_end / dt))):
    k1 = rhs(w_hat)
    k2 = rhs(w_hat + 0.5 * dt * k1)
    k3 = rhs(w_hat + 0.5 * dt * k2)
    k4 = rhs(w_hat + dt * k3)
    w_hat = w_hat + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
np.save(sys.argv[2], np.real(np.fft.ifft2(w_hat)))
